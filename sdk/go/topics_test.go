package kshard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestPublicationsReachTheTopicHandlerWithTheirPublisher(t *testing.T) {
	s := NewServer(ServerOptions{})
	var mu sync.Mutex
	var got []*Publication
	s.HandleTopics(func(_ context.Context, p *Publication) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
		if p.Topic == "refused" {
			return Errorf(422, "NotForMe", "this app ignores %s", p.Topic)
		}
		return nil
	})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)

	a := post(t, hs.URL+"/kshard/topics/news%2Fsport", []byte("hello"),
		HeaderTopic, "news/sport", HeaderPublisher, "pod-2", HeaderIncarnation, "inc-1")
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if refused := post(t, hs.URL+"/kshard/topics/refused", nil); refused.status != 422 || refused.code(t) != "NotForMe" {
		t.Fatalf("a handler's error: %d %s", refused.status, refused.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Topic != "news/sport" || got[0].Publisher != "pod-2" ||
		got[0].Incarnation != "inc-1" || string(got[0].Body) != "hello" {
		t.Fatalf("publications %+v", got)
	}
	if s.ActiveEntities() != 0 {
		t.Fatalf("a publication started an entity")
	}
}

func TestAnAppWithoutATopicHandlerRefusesPublications(t *testing.T) {
	_, _, url := newTestServer(t)
	if a := post(t, url+"/kshard/topics/news", []byte("x")); a.status != 404 || a.code(t) != "NotFound" {
		t.Fatalf("%d %s", a.status, a.body)
	}
	res, err := http.Get(url + "/kshard/topics/news")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 405 {
		t.Fatalf("GET of a topic callback answered %d", res.StatusCode)
	}
}

func TestPublishReturnsWhatEveryPodMadeOfIt(t *testing.T) {
	c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.EscapedPath() != "/v1/topics/news%2Fsport" || string(body) != "hello" {
			t.Errorf("path %q body %q", r.URL.EscapedPath(), body)
		}
		answer := PublishResult{Topic: "news/sport", Pods: 3, Accepted: 2, Entities: 4,
			Failed: []PodFailure{{Pod: "p3", Code: "OutcomeUnknown", Message: "no answer in time"}}}
		if r.URL.Query().Get("entities") == "" {
			answer.Entities = 0
		}
		b, _ := json.Marshal(answer)
		writeJSON(w, 200, b)
	})
	r, err := c.Publish(context.Background(), "news/sport", []byte("hello"))
	if err != nil || r.Pods != 3 || r.Accepted != 2 || r.Entities != 0 || r.Everyone() ||
		len(r.Failed) != 1 || r.Failed[0].Code != "OutcomeUnknown" {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = c.PublishToEntities(context.Background(), "news/sport", "counter", []byte("hello"))
	if err != nil || r.Entities != 4 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestPublishErrorsAreTheSidecars(t *testing.T) {
	c, _ := fakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		sidecarAnswer(w, 400, "BadRequest")
	})
	_, err := c.Publish(context.Background(), "..", nil)
	var se *SidecarError
	if !errors.As(err, &se) || se.Code != "BadRequest" {
		t.Fatalf("%v", err)
	}
}
