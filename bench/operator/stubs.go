package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kshard.local/e2e/support/shards"
)

// ---------------------------------------------------------------------------------------------
// Stub pods: the peer API's control calls on 127.1.x.y:7101

type stubs struct {
	n                         int
	servers                   []*http.Server
	assigns, unassigns, pings atomic.Int64

	mu    sync.Mutex
	owner map[int]int              // shard -> index of the stub pod that acknowledged holding it
	byPod map[int]map[int]struct{} // pod -> the shards it holds (a ping's answer)
	held  int                      // shards held by some stub pod
	bad   []string                 // contract violations seen (a shard assigned to a second pod while held)
}

// apply records an assign (take) or unassign of `ranges` on pod i.
func (s *stubs) apply(i int, ranges string, take bool) error {
	ids, err := shards.Parse(ranges)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sh := range ids {
		cur, ok := s.owner[sh]
		switch {
		case take && !ok:
			s.owner[sh] = i
			if s.byPod[i] == nil {
				s.byPod[i] = map[int]struct{}{}
			}
			s.byPod[i][sh] = struct{}{}
			s.held++
		case take && cur != i:
			s.bad = append(s.bad, fmt.Sprintf("shard %d assigned to %s while %s holds it", sh, podName(i), podName(cur)))
		case !take && ok && cur == i:
			delete(s.owner, sh)
			delete(s.byPod[i], sh)
			s.held--
		}
	}
	return nil
}

func (s *stubs) holding() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held, append([]string(nil), s.bad...)
}

type shardsRequest struct {
	ShardMap string `json:"shardMap"`
	Epoch    uint64 `json:"epoch"`
	Shards   string `json:"shards"`
}

func (s *stubs) control(i int, take bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req shardsRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.apply(i, req.Shards, take); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if take {
			s.assigns.Add(1)
			writeJSON(w, map[string]string{"refused": ""})
		} else {
			s.unassigns.Add(1)
			writeJSON(w, map[string]bool{"ok": true})
		}
	}
}

// keepAlivePods: up to this many stub pods, connections from the operator stay open.
const keepAlivePods = 5000

func newStubs(n int) *stubs {
	return &stubs{n: n, owner: map[int]int{}, byPod: map[int]map[int]struct{}{}}
}

func (s *stubs) listen() error {
	for i := 0; i < s.n; i++ {
		addr := net.JoinHostPort(podIP(i), strconv.Itoa(peerPort))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			s.close()
			return fmt.Errorf("listen on %s (the stub pods use 127.1.0.0/16): %w", addr, err)
		}
		name := podName(i)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, r *http.Request) {
			s.pings.Add(1)
			// The operator checks that the pod it registered answers: the stub is whichever pod
			// the query names, and reports the shards it holds.
			q := r.URL.Query()
			writeJSON(w, map[string]interface{}{"pod": name, "uid": q.Get("uid"), "incarnation": q.Get("incarnation"),
				"epoch": 0, "shards": s.heldBy(i)})
		})
		mux.HandleFunc("POST /v1/shards/assign", s.control(i, true))
		mux.HandleFunc("POST /v1/shards/unassign", s.control(i, false))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		// Beyond a few thousand pods, a listener and an idle connection from the operator per pod
		// pass the descriptors one process may have (20,000 here): one connection per call.
		srv.SetKeepAlivesEnabled(s.n <= keepAlivePods)
		s.servers = append(s.servers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	log.Printf("%d stub peer APIs listening on 127.1.0.1:%d onwards (keep-alive: %v)", s.n, peerPort, s.n <= keepAlivePods)
	return nil
}

func (s *stubs) close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
}

func writeJSON(w http.ResponseWriter, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// holdingFrom is how many shards the pods numbered first onwards hold (the rollout's new pods).
func (s *stubs) holdingFrom(first int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, pod := range s.owner {
		if pod >= first {
			n++
		}
	}
	return n
}

func (s *stubs) heldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// heldBy is the shards pod i holds, in range form.
func (s *stubs) heldBy(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int, 0, len(s.byPod[i]))
	for sh := range s.byPod[i] {
		ids = append(ids, sh)
	}
	sort.Ints(ids)
	return shards.Format(ids)
}
