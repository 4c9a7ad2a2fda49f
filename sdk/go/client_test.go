package kshard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSidecar serves the app API with `answer`; it counts the connections it accepted.
func fakeSidecar(t *testing.T, answer http.HandlerFunc) (*Client, *atomic.Int32) {
	var conns atomic.Int32
	hs := httptest.NewUnstartedServer(answer)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	c := NewClient(ClientOptions{BaseURL: hs.URL, Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	return c, &conns
}

func sidecarAnswer(w http.ResponseWriter, status int, code string) {
	w.Header().Set(HeaderError, code)
	writeError(w, status, code, "from the fake sidecar")
}

func TestAskReturnsTheAppsAnswerErrorsIncluded(t *testing.T) {
	c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderOwner, "pod-1")
		if r.URL.Query().Get("mode") != "" || r.Header.Get(HeaderIdempotencyKey) != "k" {
			t.Errorf("query %q, key %q", r.URL.RawQuery, r.Header.Get(HeaderIdempotencyKey))
		}
		if strings.HasSuffix(r.URL.Path, "/conflict") {
			writeError(w, 409, "Fenced", "a newer owner")
			return
		}
		w.Write([]byte(`{"value":3}`))
	})
	r, err := c.Ask(context.Background(), "counter", "a", []byte(`{}`), WithIdempotencyKey("k"))
	var v struct{ Value int }
	if err != nil || r.Status != 200 || r.Owner != "pod-1" || r.JSON(&v) != nil || v.Value != 3 || r.AppError() != nil {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = c.Ask(context.Background(), "counter", "conflict", nil, WithIdempotencyKey("k"))
	if err != nil || r.Status != 409 || r.AppError().Code != "Fenced" {
		t.Fatalf("the app's 409: %+v %v", r, err)
	}
}

func TestSidecarErrorsAreTyped(t *testing.T) {
	cases := []struct {
		status    int
		code      string
		sentinel  error
		delivered bool
	}{
		{400, "BadRequest", ErrBadRequest, false},
		{502, "AppUnavailable", ErrAppUnavailable, false},
		{502, "OutcomeUnknown", ErrOutcomeUnknown, true},
		{504, "OutcomeUnknown", ErrOutcomeUnknown, true},
		{503, "NotReady", ErrNotReady, false},
		{503, "EntityOverloaded", ErrEntityOverloaded, false},
		{504, "SendTimeout", ErrSendTimeout, false},
	}
	for _, tc := range cases {
		c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
			sidecarAnswer(w, tc.status, tc.code)
		})
		_, err := c.Ask(context.Background(), "counter", "a", nil)
		var se *SidecarError
		if !errors.As(err, &se) || !errors.Is(err, tc.sentinel) || se.Status != tc.status ||
			se.Delivered() != tc.delivered || IsOutcomeUnknown(err) != (tc.sentinel == ErrOutcomeUnknown) {
			t.Errorf("%d %s: %v", tc.status, tc.code, err)
		}
		if err := c.Tell(context.Background(), "counter", "a", nil); !errors.Is(err, tc.sentinel) {
			t.Errorf("tell %d %s: %v", tc.status, tc.code, err)
		}
	}
	// The HTTP layer's 413 has no Kshard-Error, and no Kshard-Owner.
	c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 413, "PayloadTooLarge", "over 4 MiB")
	})
	if _, err := c.Ask(context.Background(), "counter", "a", nil); !errors.Is(err, ErrPayloadTooLarge) {
		t.Errorf("413: %v", err)
	}
}

func TestTellAsksForTellMode(t *testing.T) {
	c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("mode") != "tell" {
			t.Errorf("mode %q", r.URL.RawQuery)
		}
		w.WriteHeader(202)
	})
	if err := c.Tell(context.Background(), "counter", "a", []byte(`{"op":"increment"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestATimeoutLeavesTheOutcomeUnknown(t *testing.T) {
	release := make(chan struct{})
	c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
	})
	defer close(release)
	start := time.Now()
	_, err := c.Ask(context.Background(), "counter", "a", []byte("x"), WithTimeout(50*time.Millisecond))
	if !IsOutcomeUnknown(err) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrSidecarUnavailable) {
		t.Fatalf("%v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the call's timeout was not applied")
	}
}

func TestAnUnreachableSidecarDeliveredNothing(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c := NewClient(ClientOptions{BaseURL: "http://" + addr})
	_, err := c.Ask(context.Background(), "counter", "a", nil)
	if !errors.Is(err, ErrSidecarUnavailable) || IsOutcomeUnknown(err) {
		t.Fatalf("%v", err)
	}
}

func TestUnicodeIdsAndLargeBodiesGoThroughAndConnectionsAreReused(t *testing.T) {
	id := "ü/日本 🙂%+?#"
	c, conns := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		want := "/v1/entities/counter/" + PathEscape(id)
		if r.URL.EscapedPath() != want || !strings.HasSuffix(r.URL.Path, "/"+id) {
			t.Errorf("path %q, want %q", r.URL.EscapedPath(), want)
		}
		// The body read in full before the answer: a Go server that answers first closes the
		// connection.
		b, _ := io.ReadAll(r.Body)
		w.Header().Set(HeaderOwner, "p")
		w.Write(b)
	})
	body := []byte(strings.Repeat("é", DefaultMaxBodyBytes/2))
	for i := 0; i < 10; i++ {
		r, err := c.Ask(context.Background(), "counter", id, body)
		if err != nil || string(r.Body) != string(body) {
			t.Fatalf("%v", err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 10 sequential calls", n)
	}
	if got := PathEscape("a/b c~"); got != "a%2Fb%20c~" {
		t.Fatalf("PathEscape: %q", got)
	}
}
