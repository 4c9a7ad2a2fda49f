package kshard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Header names of a topic's publication (sdk/README.md, "the callbacks").
const (
	HeaderTopic     = "Kshard-Topic"
	HeaderPublisher = "Kshard-Publisher"
)

// Publication is a topic's message, as the sidecar delivers it to every pod of the ShardMap.
type Publication struct {
	Topic string
	// Publisher is the pod whose app published it (Kshard-Publisher); Incarnation the
	// delivering sidecar process (Kshard-Incarnation).
	Publisher   string
	Incarnation string
	// Header holds every request header: the publisher's and kshard's.
	Header http.Header
	Body   []byte
}

// TopicHandler takes a publication. A nil error answers 2xx: the pod accepted it. An *Error
// answers its status, any other error 500 Internal; the publisher counts the pod as AppRefused.
// Called concurrently, beside entity calls: a publication is tied to no entity.
type TopicHandler func(ctx context.Context, p *Publication) error

// HandleTopics registers the handler of every topic's publications (POST /kshard/topics/{topic}).
// Without one, a publication is answered 404 and the publisher counts this pod as AppRefused.
func (s *Server) HandleTopics(h TopicHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics = h
}

func (s *Server) topicHandler() TopicHandler {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topics
}

// serveTopic serves POST /kshard/topics/{topic}; `escaped` is the topic's path segment.
func (s *Server) serveTopic(w http.ResponseWriter, r *http.Request, escaped string) {
	topic, err := url.PathUnescape(escaped)
	if err != nil || topic == "" || strings.Contains(escaped, "/") {
		writeError(w, http.StatusBadRequest, "BadRequest", "the topic must be one non-empty path segment")
		return
	}
	h := s.topicHandler()
	if h == nil {
		writeError(w, http.StatusNotFound, "NotFound", "this app takes no topic publications")
		return
	}
	if s.refuseStale(w, r.Header.Get(HeaderIncarnation)) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	p := &Publication{Topic: topic, Publisher: r.Header.Get(HeaderPublisher),
		Incarnation: r.Header.Get(HeaderIncarnation), Header: r.Header, Body: body}
	writeReply(w, nil, callTopic(r.Context(), h, p))
}

func callTopic(ctx context.Context, h TopicHandler, p *Publication) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("topic handler panicked: %v", r)
		}
	}()
	return h(ctx, p)
}

// PublishResult is what a publication came to: the pods it was sent to, those that accepted it,
// and why the others did not (codes in sdk/README.md).
type PublishResult struct {
	Topic           string       `json:"topic"`
	Pods            int          `json:"pods"`
	Accepted        int          `json:"accepted"`
	Entities        int          `json:"entities"`
	EntitiesRefused int          `json:"entitiesRefused"`
	Failed          []PodFailure `json:"failed"`
}

// PodFailure names a pod that did not accept a publication, and why.
type PodFailure struct {
	Pod     string `json:"pod"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Everyone is true when every pod the publication was sent to accepted it.
func (r *PublishResult) Everyone() bool { return r.Accepted == r.Pods && len(r.Failed) == 0 }

// Publish sends body once to every pod of the ShardMap, whose apps get it through their
// TopicHandler. Each pod gets it at most once; the result says which did. The errors are Ask's.
func (c *Client) Publish(ctx context.Context, topic string, body []byte, opts ...CallOption) (*PublishResult, error) {
	return c.publish(ctx, "/v1/topics/"+PathEscape(topic), body, opts)
}

// PublishToEntities sends body, as a tell, to every entity of entityType active on any pod of
// the ShardMap at that moment; PublishResult.Entities counts the tells queued.
func (c *Client) PublishToEntities(ctx context.Context, topic, entityType string, body []byte,
	opts ...CallOption) (*PublishResult, error) {
	return c.publish(ctx, "/v1/topics/"+PathEscape(topic)+"?entities="+PathEscape(entityType), body, opts)
}

func (c *Client) publish(ctx context.Context, target string, body []byte, opts []CallOption) (*PublishResult, error) {
	r, err := c.post(ctx, target, body, opts)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("kshard: publish answered %d: %s", r.Status, truncate(r.Body))
	}
	var out PublishResult
	if err := json.Unmarshal(r.Body, &out); err != nil {
		return nil, fmt.Errorf("kshard: the publish answer is not JSON: %w", err)
	}
	return &out, nil
}
