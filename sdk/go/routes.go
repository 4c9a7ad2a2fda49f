package kshard

import (
	"errors"
	"net/url"
	"strings"
)

// The kinds of callback the sidecar makes (sdk/README.md, "the callbacks").
type callKind int

const (
	kindMessage callKind = iota
	kindStop
	kindStart
	kindReset
	kindTopic
)

// route is a callback's path, parsed: its kind and its escaped path segments (type and id, a
// singleton's name, or a topic).
type route struct {
	kind      callKind
	singleton bool
	segments  []string
}

var suffixKinds = map[string]callKind{"stop": kindStop, "start": kindStart}

// routeOf parses a callback's escaped path; false when it names no callback.
func routeOf(path string) (route, bool) {
	if path == "/kshard/reset" {
		return route{kind: kindReset}, true
	}
	if topic, ok := strings.CutPrefix(path, "/kshard/topics/"); ok {
		return route{kind: kindTopic, segments: []string{topic}}, true
	}
	if rest, ok := strings.CutPrefix(path, "/kshard/entities/"); ok {
		return withSuffix(route{}, strings.Split(rest, "/"), 2)
	}
	if rest, ok := strings.CutPrefix(path, "/kshard/singletons/"); ok {
		return withSuffix(route{singleton: true}, strings.Split(rest, "/"), 1)
	}
	return route{}, false
}

// withSuffix takes n segments naming the entity, then an optional /stop or /start.
func withSuffix(r route, parts []string, n int) (route, bool) {
	switch {
	case len(parts) == n:
		r.kind = kindMessage
	case len(parts) == n+1 && suffixKinds[parts[n]] != kindMessage:
		r.kind = suffixKinds[parts[n]]
	default:
		return route{}, false
	}
	r.segments = parts[:n]
	return r, true
}

// key is the entity the route names: a singleton is the entity {SingletonType, name}, kept
// apart from any entity type of the app's.
func (r route) key() (entityKey, error) {
	if r.singleton {
		name, err := url.PathUnescape(r.segments[0])
		return entityKey{typ: SingletonType, id: name, singleton: true}, err
	}
	typ, err1 := url.PathUnescape(r.segments[0])
	id, err2 := url.PathUnescape(r.segments[1])
	return entityKey{typ: typ, id: id}, errors.Join(err1, err2)
}
