package kshard

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestAStartActivatesAnEntityWithoutAMessage(t *testing.T) {
	s, rec, base := newTestServer(t) // the recorder is no Starter
	if a := post(t, msgURL(base, "a")+"/start", nil, HeaderTurn, "3", HeaderEpoch, "7"); a.status != 200 {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	if s.ActiveEntities() != 1 || len(rec.messages) != 0 {
		t.Fatalf("active %d, messages %d", s.ActiveEntities(), len(rec.messages))
	}
	// A message sent before the start comes after it: late.
	if a := post(t, msgURL(base, "a"), nil, HeaderTurn, "2"); a.status != 409 || a.code(t) != "LateMessage" {
		t.Fatalf("late message: %d %s", a.status, a.body)
	}
	post(t, msgURL(base, "a")+"/stop", nil, HeaderTurn, "3")
	if rec.stopCount() != 1 || rec.stops[0].Turn != 3 || s.ActiveEntities() != 0 {
		t.Fatalf("a started entity is stopped through OnStop: %+v", rec.stops)
	}
	if a := post(t, msgURL(base, "a")+"/start", nil, HeaderTurn, "3"); a.status != 409 {
		t.Fatalf("a start as old as the stop: %d", a.status)
	}
	if a := post(t, base+"/kshard/entities/other/a/start", nil); a.status != 404 || a.code(t) != "UnknownEntityType" {
		t.Fatalf("start of an unknown type: %d %s", a.status, a.body)
	}
}

// starter counts OnStart calls and fails while fail is set.
type starter struct {
	*recorder
	mu        sync.Mutex
	starts    []*Start
	fail      error
	passivate bool
}

func (h *starter) OnStart(_ context.Context, st *Start) (*Reply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.starts = append(h.starts, st)
	if h.fail != nil {
		return nil, h.fail
	}
	return &Reply{Passivate: h.passivate}, nil
}

func (h *starter) startCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.starts)
}

func TestOnStartRunsOnceAndAFailedStartIsAskedAgain(t *testing.T) {
	s := NewServer(ServerOptions{})
	h := &starter{recorder: newRecorder(), fail: Errorf(503, "StoreUnavailable", "not yet")}
	s.Handle("counter", h)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)

	a := post(t, msgURL(hs.URL, "a")+"/start", nil, HeaderTurn, "1", HeaderEpoch, "4", HeaderShard, "9")
	if a.status != 503 || s.ActiveEntities() != 0 {
		t.Fatalf("failed start: %d, active %d", a.status, s.ActiveEntities())
	}
	post(t, msgURL(hs.URL, "a")+"/stop", nil, HeaderTurn, "1")
	if h.stopCount() != 0 {
		t.Fatal("an entity whose start failed was stopped through OnStop")
	}
	h.fail = nil
	if a := post(t, msgURL(hs.URL, "a")+"/start", nil, HeaderTurn, "2", HeaderEpoch, "4"); a.status != 200 {
		t.Fatalf("start again: %d %s", a.status, a.body)
	}
	// Idempotent: a start of an entity that runs, or that a message started, calls nothing.
	post(t, msgURL(hs.URL, "a")+"/start", nil, HeaderTurn, "3")
	post(t, msgURL(hs.URL, "b"), nil, HeaderTurn, "4")
	post(t, msgURL(hs.URL, "b")+"/start", nil, HeaderTurn, "5")
	if h.startCount() != 2 || s.ActiveEntities() != 2 {
		t.Fatalf("starts %d, active %d", h.startCount(), s.ActiveEntities())
	}
	st := h.starts[0]
	if st.Type != "counter" || st.ID != "a" || st.Turn != 1 || st.Epoch != 4 || st.Shard != 9 {
		t.Fatalf("start %+v", st)
	}
}

func TestPassivateIsSetOnTheAnswerOnlyByTheReply(t *testing.T) {
	s := NewServer(ServerOptions{})
	h := &starter{recorder: newRecorder(), passivate: true}
	s.Handle("counter", h)
	s.Handle("closing", HandlerFuncs{Message: func(context.Context, *Message) (*Reply, error) {
		r, err := JSONReply(200, "bye")
		r.Passivate = true
		return r, err
	}})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)

	if a := post(t, msgURL(hs.URL, "a")+"/start", nil); a.status != 200 || a.header.Get(HeaderPassivate) != "true" {
		t.Fatalf("start: %d %v", a.status, a.header)
	}
	if a := post(t, hs.URL+"/kshard/entities/closing/x", nil); a.status != 200 ||
		a.header.Get(HeaderPassivate) != "true" || string(a.body) != `"bye"` {
		t.Fatalf("message: %d %v %s", a.status, a.header, a.body)
	}
	if a := post(t, msgURL(hs.URL, "b"), nil); a.header.Get(HeaderPassivate) != "" {
		t.Fatalf("a reply without Passivate: %v", a.header)
	}
}

// singleton records a SingletonHandler's calls.
type singleton struct {
	mu    sync.Mutex
	calls []string
	fail  error
}

func (h *singleton) note(call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

func (h *singleton) record() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *singleton) OnStart(_ context.Context, st *Start) error {
	h.note("start " + st.Type + " " + st.ID)
	return h.fail
}

func (h *singleton) OnMessage(_ context.Context, m *Message) (*Reply, error) {
	h.note("message " + string(m.Body))
	return &Reply{Body: []byte("tick")}, nil
}

func (h *singleton) OnStop(_ context.Context, st *Stop) error {
	if st.Reset {
		h.note("reset-stop " + st.ID)
	} else {
		h.note("stop " + st.ID)
	}
	return nil
}

func TestASingletonStartsTakesMessagesAndStops(t *testing.T) {
	s := NewServer(ServerOptions{})
	h := &singleton{fail: errors.New("not yet")}
	s.HandleSingleton("ticker", h)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	url := hs.URL + "/kshard/singletons/ticker"

	if a := post(t, url+"/start", nil, HeaderTurn, "1"); a.status != 500 {
		t.Fatalf("failed start: %d", a.status)
	}
	// A message while its start is asked again: delivered; the start still runs OnStart.
	if a := post(t, url, []byte("m1"), HeaderTurn, "2"); a.status != 200 || string(a.body) != "tick" {
		t.Fatalf("message: %d %s", a.status, a.body)
	}
	h.fail = nil
	post(t, url+"/start", nil, HeaderTurn, "3")
	post(t, url+"/start", nil, HeaderTurn, "4") // running: no call
	if a := post(t, url, []byte("m2"), HeaderTurn, "4"); a.status != 409 {
		t.Fatalf("late message: %d", a.status)
	}
	post(t, url+"/stop", nil, HeaderTurn, "4")
	post(t, url+"/stop", nil, HeaderTurn, "4") // not running: no call
	want := []string{"start kshard.io/singleton ticker", "message m1", "start kshard.io/singleton ticker",
		"stop ticker"}
	if got := h.record(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] ||
		got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if a := post(t, hs.URL+"/kshard/singletons/other/start", nil); a.status != 404 || a.code(t) != "UnknownSingleton" {
		t.Fatalf("unknown singleton: %d %s", a.status, a.body)
	}
	// A singleton is no entity of the app's, even of a type spelled as its own.
	if a := post(t, hs.URL+"/kshard/entities/kshard.io%2Fsingleton/ticker", nil); a.status != 404 {
		t.Fatalf("a singleton reached through the entity path: %d", a.status)
	}
}

func TestResetStopsSingletonsAndRefusesTheOldProcessesStarts(t *testing.T) {
	s, rec, base := newTestServer(t)
	h := &singleton{}
	s.HandleSingleton("ticker", h)
	post(t, base+"/kshard/singletons/ticker/start", nil, HeaderIncarnation, "old", HeaderTurn, "1")
	post(t, msgURL(base, "a")+"/start", nil, HeaderIncarnation, "old", HeaderTurn, "2")
	if a := post(t, base+"/kshard/reset", nil, HeaderIncarnation, "new"); a.status != 200 {
		t.Fatalf("reset: %d", a.status)
	}
	if got := h.record(); len(got) != 2 || got[1] != "reset-stop ticker" || rec.stopCount() != 1 {
		t.Fatalf("singleton calls %q, entity stops %d", got, rec.stopCount())
	}
	for _, path := range []string{"/kshard/singletons/ticker/start", "/kshard/entities/counter/a/start"} {
		if a := post(t, base+path, nil, HeaderIncarnation, "old", HeaderTurn, "9"); a.status != 409 ||
			a.code(t) != "StaleSidecar" {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
	}
	// Turns start over with the new process.
	if a := post(t, base+"/kshard/singletons/ticker/start", nil, HeaderIncarnation, "new", HeaderTurn, "1"); a.status != 200 {
		t.Fatalf("start after the reset: %d", a.status)
	}
	if s.ActiveEntities() != 1 {
		t.Fatalf("active %d", s.ActiveEntities())
	}
}
