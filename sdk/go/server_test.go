package kshard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a Handler that records its calls and counts calls running at once.
type recorder struct {
	mu       sync.Mutex
	messages []*Message
	stops    []*Stop
	running  map[string]int
	maxPer   int   // most calls at once for one entity
	maxAll   int32 // most calls at once overall
	now      atomic.Int32
	delay    time.Duration
	stopErr  error
	block    chan struct{} // when set, OnMessage waits for it
}

func newRecorder() *recorder { return &recorder{running: map[string]int{}} }

func (r *recorder) OnMessage(ctx context.Context, m *Message) (*Reply, error) {
	r.mu.Lock()
	r.running[m.ID]++
	r.maxPer = max(r.maxPer, r.running[m.ID])
	r.messages = append(r.messages, m)
	r.mu.Unlock()
	n := r.now.Add(1)
	for {
		old := atomic.LoadInt32(&r.maxAll)
		if n <= old || atomic.CompareAndSwapInt32(&r.maxAll, old, n) {
			break
		}
	}
	if r.block != nil {
		<-r.block
	}
	time.Sleep(r.delay)
	r.now.Add(-1)
	r.mu.Lock()
	r.running[m.ID]--
	r.mu.Unlock()
	return JSONReply(200, map[string]any{"id": m.ID, "bytes": len(m.Body)})
}

func (r *recorder) OnStop(ctx context.Context, s *Stop) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopErr != nil {
		return r.stopErr
	}
	r.stops = append(r.stops, s)
	return nil
}

func (r *recorder) stopCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stops)
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	code, _, ok := decodeError(a.body)
	if !ok {
		t.Fatalf("not an error body: %d %q", a.status, a.body)
	}
	return code
}

func post(t *testing.T, url string, body []byte, headers ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, b}
}

func newTestServer(t *testing.T) (*Server, *recorder, string) {
	s := NewServer(ServerOptions{})
	rec := newRecorder()
	s.Handle("counter", rec)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, rec, hs.URL
}

func msgURL(base, id string) string { return base + "/kshard/entities/counter/" + PathEscape(id) }

func TestCallsOfOneEntityRunOneAtATimeAndOthersConcurrently(t *testing.T) {
	_, rec, base := newTestServer(t)
	rec.delay = 5 * time.Millisecond
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if a := post(t, msgURL(base, fmt.Sprint("e", i%4)), nil); a.status != 200 {
				t.Errorf("status %d", a.status)
			}
		}(i)
	}
	wg.Wait()
	if rec.maxPer != 1 {
		t.Errorf("an entity ran %d calls at once", rec.maxPer)
	}
	if atomic.LoadInt32(&rec.maxAll) < 2 {
		t.Errorf("different entities never ran at once")
	}
}

func TestMessagesAreTakenInTurnOrderAndLateOnesRefused(t *testing.T) {
	s, rec, base := newTestServer(t)
	for turn := 1; turn <= 5; turn++ {
		if a := post(t, msgURL(base, "a"), nil, HeaderTurn, fmt.Sprint(turn)); a.status != 200 {
			t.Fatalf("turn %d: %d", turn, a.status)
		}
	}
	for _, turn := range []string{"5", "3"} {
		a := post(t, msgURL(base, "a"), nil, HeaderTurn, turn)
		if a.status != 409 || a.code(t) != "LateMessage" || a.header.Get(HeaderError) != "" {
			t.Fatalf("turn %s: %d %s", turn, a.status, a.body)
		}
	}
	if a := post(t, msgURL(base, "a")+"/stop", nil, HeaderTurn, "7"); a.status != 200 {
		t.Fatalf("stop: %d", a.status)
	}
	if rec.stopCount() != 1 || rec.stops[0].Turn != 7 || s.ActiveEntities() != 0 {
		t.Fatalf("stops %+v, active %d", rec.stops, s.ActiveEntities())
	}
	// Sent before the stop, come after it: refused, the entity does not start again.
	if a := post(t, msgURL(base, "a"), nil, HeaderTurn, "6"); a.status != 409 {
		t.Fatalf("late message after stop: %d", a.status)
	}
	if s.ActiveEntities() != 0 {
		t.Fatal("a late message started the entity")
	}
	if a := post(t, msgURL(base, "a"), nil, HeaderTurn, "8"); a.status != 200 || s.ActiveEntities() != 1 {
		t.Fatalf("next message: %d", a.status)
	}
	// No turn: not checked.
	if a := post(t, msgURL(base, "a"), nil); a.status != 200 {
		t.Fatalf("no turn: %d", a.status)
	}
}

func TestStopOfAnEntityNotHeldIs2xxAndCallsNoHandler(t *testing.T) {
	_, rec, base := newTestServer(t)
	for _, url := range []string{msgURL(base, "never") + "/stop", base + "/kshard/entities/other/x/stop"} {
		if a := post(t, url, nil, HeaderTurn, "3"); a.status != 200 {
			t.Fatalf("%s: %d", url, a.status)
		}
	}
	if rec.stopCount() != 0 {
		t.Fatal("OnStop called for an entity never started")
	}
	// The stop's turn bounds the entity all the same.
	if a := post(t, msgURL(base, "never"), nil, HeaderTurn, "2"); a.status != 409 {
		t.Fatalf("late message: %d", a.status)
	}
}

func TestAFailedStopKeepsTheEntityActive(t *testing.T) {
	s, rec, base := newTestServer(t)
	post(t, msgURL(base, "a"), nil, HeaderTurn, "1")
	rec.stopErr = Errorf(500, "StoreUnavailable", "disk full")
	a := post(t, msgURL(base, "a")+"/stop", nil, HeaderTurn, "1")
	if a.status != 500 || a.code(t) != "StoreUnavailable" || s.ActiveEntities() != 1 {
		t.Fatalf("stop: %d %s, active %d", a.status, a.body, s.ActiveEntities())
	}
	rec.stopErr = nil
	if a := post(t, msgURL(base, "a")+"/stop", nil, HeaderTurn, "1"); a.status != 200 || s.ActiveEntities() != 0 {
		t.Fatalf("second stop: %d", a.status)
	}
}

func TestResetStopsEveryEntityAndRefusesOtherSidecarProcesses(t *testing.T) {
	s, rec, base := newTestServer(t)
	resets := 0
	s.OnReset(func(context.Context) error { resets++; return nil })
	for i, id := range []string{"a", "b", "c"} {
		post(t, msgURL(base, id), nil, HeaderIncarnation, "old", HeaderTurn, fmt.Sprint(100+i))
	}
	if a := post(t, base+"/kshard/reset", nil, HeaderIncarnation, "new"); a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	if rec.stopCount() != 3 || !rec.stops[0].Reset || resets != 1 || s.ActiveEntities() != 0 {
		t.Fatalf("stops %+v resets %d", rec.stops, resets)
	}
	a := post(t, msgURL(base, "a"), nil, HeaderIncarnation, "old", HeaderTurn, "200")
	if a.status != 409 || a.code(t) != "StaleSidecar" {
		t.Fatalf("old process's message: %d %s", a.status, a.body)
	}
	if a := post(t, msgURL(base, "a")+"/stop", nil, HeaderIncarnation, "old"); a.status != 409 {
		t.Fatalf("old process's stop: %d", a.status)
	}
	// Turns start over with the new process.
	if a := post(t, msgURL(base, "a"), nil, HeaderIncarnation, "new", HeaderTurn, "1"); a.status != 200 {
		t.Fatalf("new process's first turn: %d %s", a.status, a.body)
	}
}

func TestResetWaitsForTheCallsInFlight(t *testing.T) {
	_, rec, base := newTestServer(t)
	rec.block = make(chan struct{})
	done := make(chan answer)
	go func() { done <- post(t, msgURL(base, "a"), nil, HeaderTurn, "1") }()
	for rec.now.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	resetDone := make(chan answer)
	go func() { resetDone <- post(t, base+"/kshard/reset", nil, HeaderIncarnation, "x") }()
	select {
	case <-resetDone:
		t.Fatal("the reset did not wait for the message at work")
	case <-time.After(100 * time.Millisecond):
	}
	close(rec.block)
	if a := <-done; a.status != 200 {
		t.Fatalf("message: %d", a.status)
	}
	if a := <-resetDone; a.status != 200 || rec.stopCount() != 1 {
		t.Fatalf("reset: %d, stops %d", a.status, rec.stopCount())
	}
}

func TestErrorAnswersHaveKshardsShape(t *testing.T) {
	s, _, base := newTestServer(t)
	s.Handle("failing", HandlerFuncs{Message: func(context.Context, *Message) (*Reply, error) {
		return nil, errors.New("boom")
	}})
	s.Handle("panicking", HandlerFuncs{Message: func(context.Context, *Message) (*Reply, error) {
		panic("boom")
	}})
	s.Handle("refusing", HandlerFuncs{Message: func(context.Context, *Message) (*Reply, error) {
		return nil, fmt.Errorf("wrapped: %w", Errorf(422, "Invalid", "no"))
	}})
	cases := []struct {
		url    string
		status int
		code   string
	}{
		{base + "/kshard/entities/nope/a", 404, "UnknownEntityType"},
		{base + "/kshard/entities/failing/a", 500, "Internal"},
		{base + "/kshard/entities/panicking/a", 500, "Internal"},
		{base + "/kshard/entities/refusing/a", 422, "Invalid"},
		{base + "/kshard/other", 404, "NotFound"},
		{base + "/kshard/entities/counter/a/b/c", 404, "NotFound"},
	}
	for _, c := range cases {
		a := post(t, c.url, nil)
		if a.status != c.status || a.code(t) != c.code || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s", c.url, a.status, a.body)
		}
	}
	res, err := http.Get(msgURL(base, "a"))
	if err != nil || res.StatusCode != 405 || res.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %v %v", err, res)
	}
	res.Body.Close()
}

func TestHeadersUnicodeIdsAndLargeBodiesReachTheHandler(t *testing.T) {
	_, rec, base := newTestServer(t)
	id := "ü/日本 🙂%+?#"
	body := []byte(strings.Repeat("x", DefaultMaxBodyBytes))
	a := post(t, msgURL(base, id), body, HeaderShard, "17", HeaderEpoch, "9", HeaderMode, "tell",
		HeaderIncarnation, "inc", HeaderTurn, "4", HeaderIdempotencyKey, "k1")
	var out struct {
		ID    string
		Bytes int
	}
	if err := json.Unmarshal(a.body, &out); a.status != 200 || err != nil {
		t.Fatalf("%d %s", a.status, a.body)
	}
	m := rec.messages[0]
	if out.ID != id || m.ID != id || out.Bytes != len(body) || m.Shard != 17 || m.Epoch != 9 ||
		m.Mode != "tell" || m.Incarnation != "inc" || m.Turn != 4 || m.Header.Get(HeaderIdempotencyKey) != "k1" {
		t.Fatalf("message %+v, answer %+v", m, out)
	}
	if a := post(t, msgURL(base, id), append(body, 'x')); a.status != 413 || a.code(t) != "PayloadTooLarge" {
		t.Fatalf("over the limit: %d", a.status)
	}
}

func TestStopBoundsAreForgottenAfterTheirTime(t *testing.T) {
	s, _, base := newTestServer(t)
	now := time.Unix(1000, 0)
	s.t.now = func() time.Time { return now }
	s.t.keep = time.Minute
	post(t, msgURL(base, "a")+"/stop", nil, HeaderTurn, "5")
	now = now.Add(2 * time.Minute)
	post(t, msgURL(base, "b")+"/stop", nil, HeaderTurn, "5")
	if s.t.entityOf(entityKey{typ: "counter", id: "a"}) != nil || s.t.entityOf(entityKey{typ: "counter", id: "b"}) == nil {
		t.Fatal("the old bound was kept or the new one dropped")
	}
}

type headerHandler struct{}

func (headerHandler) OnMessage(ctx context.Context, m *Message) (*Reply, error) {
	r, err := JSONReply(502, map[string]any{"nested": "failed"})
	if err != nil {
		return nil, err
	}
	r.Header.Set(HeaderError, "SendTimeout")
	r.Header.Set("X-App", "kept")
	return r, nil
}

func (headerHandler) OnStop(ctx context.Context, s *Stop) error { return nil }

// A handler that copies a nested call's Kshard-Error onto its answer must not make its caller
// read the message as not delivered: Kshard-* headers are the sidecar's to set.
func TestAHandlersKshardHeadersAreNotPassedOn(t *testing.T) {
	s := NewServer(ServerOptions{})
	s.Handle("counter", headerHandler{})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	a := post(t, msgURL(hs.URL, "c1"), nil)
	if a.status != 502 || a.header.Get(HeaderError) != "" || a.header.Get("X-App") != "kept" {
		t.Fatalf("answer %d, Kshard-Error %q, X-App %q; want 502, none, kept",
			a.status, a.header.Get(HeaderError), a.header.Get("X-App"))
	}
}
