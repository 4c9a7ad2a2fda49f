package httpcall

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestGetAndPost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, r.Method+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("Authorization")+" "+string(body))
	}))
	defer srv.Close()
	if status, text := Get(time.Second, srv.URL); status != 201 || text != "GET   " {
		t.Errorf("Get: %d %q", status, text)
	}
	if status, text := Post(time.Second, srv.URL, `{"a":1}`, "tok"); status != 201 || text != `POST application/json Bearer tok {"a":1}` {
		t.Errorf("Post with a token: %d %q", status, text)
	}
	if status, text := Post(time.Second, srv.URL, "{}", ""); status != 201 || text != "POST application/json  {}" {
		t.Errorf("Post without a token: %d %q", status, text)
	}
}

func TestNoAnswerIsStatusZero(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := srv.URL
	srv.Close()
	if status, text := Get(time.Second, url); status != 0 || text == "" {
		t.Errorf("Get of a closed server: %d %q, want 0 and the error", status, text)
	}
	if status, text := Post(time.Second, "http://[::1", "", ""); status != 0 || text == "" {
		t.Errorf("Post to a malformed URL: %d %q, want 0 and the error", status, text)
	}
}
