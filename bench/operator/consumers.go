package main

// The ShardMap's consumers, as sidecars are on the wire: what each receives per status write.
//
//   - full: today's sidecar. It lists the ShardMap and watches it, and so receives the whole
//     object on every status write.
//   - delta: the new sidecar. It lists and watches the ShardMap's metadata only
//     (PartialObjectMetadata, as client-go's metadata client asks), and on every event with a
//     resourceVersion it does not hold asks the operator's manager API for the changes:
//     GET /v1/shardmaps/NS/NAME/assignments?since=HAVE&want=X, with its pod's projected token,
//     one request at a time. When the operator does not know X (wantKnown false), answers
//     something else than 200, or cannot be reached, the consumer GETs the ShardMap from the API
//     server (a fallback). An operator without delta support answers the whole ShardMap
//     (kind ShardMap): a full answer.
//
// Every byte read from a consumer's connections is counted (through a net.Conn wrapper, so TLS
// records and HTTP headers included), by source (API server watch and list, operator answers,
// fallback GETs) and by phase (registration, rollout). The connections to the API server speak
// HTTP/1.1, so that a watch and a fallback GET never share one. Consumers do not apply what they
// receive.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

const (
	srcAPI      = iota // the list and watch through the API server
	srcOperator        // the manager API's answers
	srcFallback        // GETs of the ShardMap from the API server
	nSources
)

const (
	phaseRegistration = iota
	phaseRollout
	nPhases
)

var phaseNames = [nPhases]string{"registration", "rollout"}

const (
	acceptList  = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	acceptWatch = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
)

// kindStats are the figures of one kind of consumer, by phase.
type kindStats struct {
	name      string
	bytes     [nPhases][nSources]atomic.Int64
	maxWrite  [nPhases]atomic.Int64 // most bytes one consumer read for one write (or one fetch)
	writes    [nPhases]sizeLog      // bytes one consumer read for each write (or fetch)
	events    [nPhases]atomic.Int64 // watch events (ADDED, MODIFIED) received, all consumers
	fetches   [nPhases]atomic.Int64 // requests to the manager API (delta)
	fallbacks [nPhases]atomic.Int64 // GETs of the ShardMap from the API server (delta)
	unknown   [nPhases]atomic.Int64 // answers with wantKnown false and another version (delta)
	started   [nPhases]atomic.Int64 // consumers started
}

func (k *kindStats) total(phase int) int64 {
	var n int64
	for s := 0; s < nSources; s++ {
		n += k.bytes[phase][s].Load()
	}
	return n
}

// sizeLog keeps sizes, for percentiles.
type sizeLog struct {
	mu sync.Mutex
	v  []int32
}

func (l *sizeLog) add(n int64) {
	l.mu.Lock()
	l.v = append(l.v, int32(min(n, 1<<31-1)))
	l.mu.Unlock()
}

// percentile p (0..100) of the sizes; 0 when there are none.
func (l *sizeLog) percentile(p float64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.v) == 0 {
		return 0
	}
	s := append([]int32(nil), l.v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return int64(s[min(len(s)-1, int(p/100*float64(len(s))))])
}

// oneWrite records what one consumer read for one write.
func (k *kindStats) oneWrite(ph int32, n int64) {
	storeMax(&k.maxWrite[ph], n)
	k.writes[ph].add(n)
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// consumer is one running consumer; seen is the resourceVersion it is up to date with.
type consumer struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   string
}

func (c *consumer) setSeen(rv string) {
	c.mu.Lock()
	c.seen = rv
	c.mu.Unlock()
}

func (c *consumer) seenRV() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen
}

// fleet runs the consumers: at most one of each kind per pod.
type fleet struct {
	o          options
	base       *rest.Config
	manager    string
	pods       *podSet
	full       bool // full consumers for the pods in the first o.fullSample slots
	delta      bool // a delta consumer for every pod
	phase      atomic.Int32
	fullStats  kindStats
	deltaStats kindStats

	mu      sync.Mutex
	running map[string]*consumer // "full/7", "delta/7": kind and pod index
}

func newFleet(o options, base *rest.Config, manager string, pods *podSet) *fleet {
	f := &fleet{o: o, base: base, manager: manager, pods: pods, running: map[string]*consumer{},
		full: o.consumers == "full" || o.consumers == "both", delta: o.consumers == "delta" || o.consumers == "both"}
	f.fullStats.name, f.deltaStats.name = "full", "delta"
	return f
}

// fullSlots is how many pod slots have a full consumer: the figures per consumer are the same
// for every pod, so only a sample runs and totals are extrapolated to every pod.
func (f *fleet) fullSlots() int { return min(f.o.fullSample, f.o.pods) }

// start starts the consumers of pod index pod, which runs in slot slot (0..pods-1; the rollout's
// new pod of a slot replaces its old pod).
func (f *fleet) start(slot, pod int) {
	ph := int(f.phase.Load())
	if f.full && slot < f.fullSlots() {
		c := f.launch(fmt.Sprintf("full/%d", pod))
		f.fullStats.started[ph].Add(1)
		go f.runFull(c)
	}
	if f.delta {
		c := f.launch(fmt.Sprintf("delta/%d", pod))
		f.deltaStats.started[ph].Add(1)
		go f.runDelta(c, pod)
	}
}

func (f *fleet) launch(key string) *consumer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{ctx: ctx, cancel: cancel}
	f.mu.Lock()
	f.running[key] = c
	f.mu.Unlock()
	return c
}

// stop stops the consumers of pod index pod (its pod is gone).
func (f *fleet) stop(pod int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, key := range []string{fmt.Sprintf("full/%d", pod), fmt.Sprintf("delta/%d", pod)} {
		if c, ok := f.running[key]; ok {
			c.cancel()
			delete(f.running, key)
		}
	}
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, c := range f.running {
		c.cancel()
		delete(f.running, key)
	}
}

// settle waits until every consumer is up to date with resourceVersion latest() (which may
// move), for at most `limit`; it reports how many were not.
func (f *fleet) settle(ctx context.Context, latest func() string, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		want := latest()
		behind := 0
		f.mu.Lock()
		for _, c := range f.running {
			if !rvAtLeast(c.seenRV(), want) {
				behind++
			}
		}
		f.mu.Unlock()
		if behind == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return behind
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rvAtLeast: whether resourceVersion have is want or newer. The API server's versions are
// etcd's revisions, numbers; other texts are compared for equality only.
func rvAtLeast(have, want string) bool {
	if have == want {
		return true
	}
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && h >= w
}

// ---------------------------------------------------------------------------------------------
// Connections

type countingConn struct {
	net.Conn
	add func(int)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.add(n)
	}
	return n, err
}

// counter adds what a connection reads to the kind's figures of the current phase and to own.
func (f *fleet) counter(k *kindStats, src int, own *atomic.Int64) func(int) {
	return func(n int) {
		k.bytes[f.phase.Load()][src].Add(int64(n))
		own.Add(int64(n))
	}
}

// countingDial dials from `local` (nil: any address).
func countingDial(add func(int), local net.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: local}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, add: add}, nil
	}
}

// apiClient is an HTTP/1.1 client of the API server, with the benchmark's credentials, whose
// connections count what they read.
func (f *fleet) apiClient(add func(int)) (*http.Client, error) {
	cfg := rest.CopyConfig(f.base)
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	cfg.Dial = countingDial(add, nil)
	cfg.Timeout = 0
	return rest.HTTPClientFor(cfg)
}

func (f *fleet) mapPath() string {
	return fmt.Sprintf("%s/apis/kshard.io/v1alpha1/namespaces/%s/shardmaps", f.base.Host, f.o.namespace)
}

func get(ctx context.Context, c *http.Client, url, accept, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %d %.200s", url, resp.StatusCode, body)
	}
	return resp, nil
}

type objectMeta struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// watchMap lists the ShardMap, then watches it until ctx ends (watching again from the last
// version when a watch ends, listing again when the version is too old). onEvent gets "LIST"
// (with the listed object's version and the list's size) and every ADDED or MODIFIED event
// (version, and the event's size as JSON). meta: the metadata only.
func (f *fleet) watchMap(ctx context.Context, c *http.Client, meta bool, onEvent func(typ, rv string, size int)) {
	list, watch := "application/json", "application/json"
	if meta {
		list, watch = acceptList, acceptWatch
	}
	base := f.mapPath() + "?fieldSelector=" + url.QueryEscape("metadata.name="+f.o.name)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = f.listMap(ctx, c, base, list, onEvent); err != nil {
				rv = ""
				f.pause(ctx, err)
				continue
			}
		}
		resp, err := get(ctx, c, base+"&watch=1&allowWatchBookmarks=true&resourceVersion="+rv, watch, "")
		if err != nil {
			f.pause(ctx, err)
			continue
		}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			at := dec.InputOffset()
			if err := dec.Decode(&ev); err != nil {
				break
			}
			var obj objectMeta
			_ = json.Unmarshal(ev.Object, &obj)
			switch ev.Type {
			case "ERROR": // 410 Gone: list again
				rv = ""
			case "BOOKMARK":
				rv = obj.Metadata.ResourceVersion
			case "ADDED", "MODIFIED":
				rv = obj.Metadata.ResourceVersion
				onEvent(ev.Type, rv, int(dec.InputOffset()-at))
			}
			if rv == "" {
				break
			}
		}
		resp.Body.Close()
	}
}

func (f *fleet) listMap(ctx context.Context, c *http.Client, base, accept string, onEvent func(typ, rv string, size int)) (string, error) {
	resp, err := get(ctx, c, base, accept, "")
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	var l struct {
		objectMeta
		Items []objectMeta `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return "", err
	}
	if len(l.Items) > 0 {
		onEvent("LIST", l.Items[0].Metadata.ResourceVersion, len(body))
	}
	return l.Metadata.ResourceVersion, nil
}

var pauses atomic.Int64

func (f *fleet) pause(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	if n := pauses.Add(1); n <= 5 {
		log.Printf("consumer: %v; again in 1 s", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
}

// ---------------------------------------------------------------------------------------------
// The two kinds

func (f *fleet) runFull(c *consumer) {
	var own atomic.Int64
	k := &f.fullStats
	client, err := f.apiClient(f.counter(k, srcAPI, &own))
	if err != nil {
		log.Printf("full consumer: %v", err)
		return
	}
	defer client.CloseIdleConnections()
	f.watchMap(c.ctx, client, false, func(typ, rv string, size int) {
		if typ != "LIST" {
			ph := f.phase.Load()
			k.events[ph].Add(1)
			k.oneWrite(ph, int64(size))
		}
		c.setSeen(rv)
	})
}

// deltaConsumer is the state of one delta consumer.
type deltaConsumer struct {
	f                  *fleet
	c                  *consumer
	token              string
	op, fallback       *http.Client
	opBytes, fbBytes   atomic.Int64
	kick               chan struct{}
	mu                 sync.Mutex
	have, want         string
	pendingEventBytes  int64 // event bytes since the last fetch
	apiBytes           atomic.Int64
	fallbackClientErr  error
	fallbackClientOnce sync.Once
}

func (f *fleet) runDelta(c *consumer, pod int) {
	k := &f.deltaStats
	d := &deltaConsumer{f: f, c: c, token: f.pods.tokens[pod], kick: make(chan struct{}, 1)}
	// From the pod's own address, as a sidecar's requests come: the manager API limits the
	// connections of one peer address.
	d.op = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext:         countingDial(f.counter(k, srcOperator, &d.opBytes), &net.TCPAddr{IP: net.ParseIP(podIP(pod))}),
		MaxIdleConnsPerHost: 1}}
	defer d.op.CloseIdleConnections()
	api, err := f.apiClient(f.counter(k, srcAPI, &d.apiBytes))
	if err != nil {
		log.Printf("delta consumer: %v", err)
		return
	}
	defer api.CloseIdleConnections()
	go d.fetchLoop()
	f.watchMap(c.ctx, api, true, func(typ, rv string, size int) {
		if typ != "LIST" {
			k.events[f.phase.Load()].Add(1)
		}
		d.mu.Lock()
		d.pendingEventBytes += int64(size)
		d.want = rv
		d.mu.Unlock()
		select {
		case d.kick <- struct{}{}:
		default:
		}
	})
}

// fetchLoop asks the operator, one request at a time, for the newest version an event named.
func (d *deltaConsumer) fetchLoop() {
	k := &d.f.deltaStats
	defer func() {
		if d.fallback != nil {
			d.fallback.CloseIdleConnections()
		}
	}()
	for {
		select {
		case <-d.c.ctx.Done():
			return
		case <-d.kick:
		}
		for d.c.ctx.Err() == nil {
			d.mu.Lock()
			have, want, events := d.have, d.want, d.pendingEventBytes
			d.pendingEventBytes = 0
			d.mu.Unlock()
			if want == "" || rvAtLeast(have, want) {
				d.c.setSeen(have)
				break
			}
			got, wire := d.fetch(have, want)
			if have != "" { // the first read is the whole map, as a full consumer's list
				k.oneWrite(d.f.phase.Load(), events+wire)
			}
			d.mu.Lock()
			d.have = got
			d.mu.Unlock()
			d.c.setSeen(got)
			if got == have { // nothing learnt (both sources failed): not in a tight loop
				d.f.pause(d.c.ctx, fmt.Errorf("delta consumer: no newer version than %q", have))
			}
		}
	}
}

type deltaAnswer struct {
	Kind            string          `json:"kind"`
	ResourceVersion string          `json:"resourceVersion"`
	WantKnown       *bool           `json:"wantKnown"`
	Changes         json.RawMessage `json:"changes"` // absent: the operator holds no version the consumer holds
	objectMeta                      // kind ShardMap: an operator without delta support
}

// fetch asks the operator for the changes since `have` up to `want`; it returns the version the
// consumer then holds and the bytes it read for it.
func (d *deltaConsumer) fetch(have, want string) (string, int64) {
	k, ph := &d.f.deltaStats, d.f.phase.Load()
	k.fetches[ph].Add(1)
	u := fmt.Sprintf("http://%s/v1/shardmaps/%s/%s/assignments?since=%s&want=%s", d.f.manager,
		d.f.o.namespace, d.f.o.name, url.QueryEscape(have), url.QueryEscape(want))
	before := d.opBytes.Load()
	var a deltaAnswer
	resp, err := get(d.c.ctx, d.op, u, "application/json", d.token)
	if err == nil {
		var body []byte
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = json.Unmarshal(body, &a)
		}
	}
	wire := d.opBytes.Load() - before
	if err == nil {
		rv, known := a.ResourceVersion, a.WantKnown != nil && *a.WantKnown
		if a.Kind == "ShardMap" {
			rv = a.Metadata.ResourceVersion
			known = rvAtLeast(rv, want)
		}
		if a.Kind == "ShardMapDelta" && a.Changes == nil {
			// No changes from a version the operator does not hold: a sidecar reads the API.
			rv, fb := d.fallbackGet(want)
			if rv == "" {
				rv = have
			}
			return rv, wire + fb
		}
		if known || rv == want {
			return rv, wire
		}
		k.unknown[ph].Add(1)
	} else if d.c.ctx.Err() != nil {
		return have, wire
	}
	rv, fb := d.fallbackGet(want)
	if rv == "" {
		rv = have
	}
	return rv, wire + fb
}

// fallbackGet GETs the ShardMap from the API server, on a client of its own, at least at version
// `want` (from the API server's cache, as the sidecar asks since main's 1b1ef2f).
func (d *deltaConsumer) fallbackGet(want string) (string, int64) {
	k := &d.f.deltaStats
	k.fallbacks[d.f.phase.Load()].Add(1)
	d.fallbackClientOnce.Do(func() {
		d.fallback, d.fallbackClientErr = d.f.apiClient(d.f.counter(k, srcFallback, &d.fbBytes))
	})
	if d.fallbackClientErr != nil {
		return "", 0
	}
	before := d.fbBytes.Load()
	resp, err := get(d.c.ctx, d.fallback, d.f.mapPath()+"/"+d.f.o.name+"?resourceVersion="+url.QueryEscape(want), "application/json", "")
	if err != nil {
		return "", d.fbBytes.Load() - before
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var obj objectMeta
	if err == nil {
		err = json.Unmarshal(body, &obj)
	}
	if err != nil {
		return "", d.fbBytes.Load() - before
	}
	return obj.Metadata.ResourceVersion, d.fbBytes.Load() - before
}
