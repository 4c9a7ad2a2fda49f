// kshard-operator-stub-pod: a stand-in for kshard-sidecar in the operator's cluster tests. It
// serves the peer API's control calls (ping, assign, unassign) on POD_IP:7101 with the sidecar's
// ownership rules (an unassign fences its shards: a later assign with an older epoch is refused),
// registers with the operator when it starts and unregisters on SIGTERM, like the real sidecar.
// It runs no entities: the tests check the operator's side of the contract.
//
// Environment: POD_NAME, POD_NAMESPACE, POD_UID, POD_IP (downward API), KSHARD_SHARD_MAP (the
// ShardMap's name), KSHARD_MANAGERS (comma-separated host:port of the operator replicas; a
// follower's 503 names the leader), KSHARD_VERSION (the version label), KSHARD_MANAGER_TOKEN_FILE
// (the pod's projected token, audience kshard.io/operator, sent as a bearer token).
//
// Besides the peer API: GET /healthz, and GET /debug/stats with the counts of calls received.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"kshard.local/e2e/support/envvar"
	"kshard.local/e2e/support/httpjson"
	"kshard.local/e2e/support/shards"
)

type stub struct {
	pod, uid, ns, shardMap, address, version string
	managers                                 []string

	mu        sync.Mutex
	owned     map[int]uint64 // shard -> epoch it is held at
	fences    map[int]uint64 // shard -> epoch of the last unassign
	draining  bool
	assigns   int
	unassigns int
	refused   int
	leader    string
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	httpjson.Write(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

type shardsRequest struct {
	ShardMap string `json:"shardMap"`
	Epoch    uint64 `json:"epoch"`
	Shards   string `json:"shards"`
}

func (s *stub) readShards(w http.ResponseWriter, r *http.Request) (*shardsRequest, []int, bool) {
	var req shardsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, 400, "BadRequest", err.Error())
		return nil, nil, false
	}
	if req.ShardMap != s.ns+"/"+s.shardMap {
		writeError(w, 404, "UnknownShardMap", "this pod serves "+s.ns+"/"+s.shardMap)
		return nil, nil, false
	}
	ids, err := shards.Parse(req.Shards)
	if err != nil {
		writeError(w, 400, "BadRequest", err.Error())
		return nil, nil, false
	}
	return &req, ids, true
}

func (s *stub) ping(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var held []int
	var epoch uint64
	for sh, e := range s.owned {
		held = append(held, sh)
		if e > epoch {
			epoch = e
		}
	}
	httpjson.Write(w, 200, map[string]any{"pod": s.pod, "uid": s.uid, "epoch": epoch, "shards": shards.Format(held)})
}

// shardsCall is the handler of an assign or unassign: it reads the body (answering a bad one
// itself) and runs apply with s.mu held.
func (s *stub) shardsCall(apply func(w http.ResponseWriter, req *shardsRequest, ids []int)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ids, ok := s.readShards(w, r)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		apply(w, req, ids)
	}
}

func (s *stub) assign(w http.ResponseWriter, req *shardsRequest, ids []int) {
	s.assigns++
	var refused []int
	for _, sh := range ids {
		// The sidecar's fence: an assign older than the last unassign of the shard is a delayed
		// duplicate; a draining pod takes nothing.
		if s.draining || s.fences[sh] > req.Epoch {
			refused = append(refused, sh)
			continue
		}
		if req.Epoch > s.owned[sh] {
			s.owned[sh] = req.Epoch
		}
	}
	s.refused += len(refused)
	httpjson.Write(w, 200, map[string]string{"refused": shards.Format(refused)})
}

func (s *stub) unassign(w http.ResponseWriter, req *shardsRequest, ids []int) {
	s.unassigns++
	for _, sh := range ids {
		if req.Epoch > s.fences[sh] {
			s.fences[sh] = req.Epoch
		}
		delete(s.owned, sh)
	}
	httpjson.Write(w, 200, map[string]any{})
}

func (s *stub) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	httpjson.Write(w, 200, map[string]int{"assigns": s.assigns, "unassigns": s.unassigns, "refused": s.refused, "owned": len(s.owned)})
}

// call posts `body` to the manager API, trying the last known leader first and following a
// follower's "leader" hint. It returns the HTTP status of the leader's answer.
func (s *stub) call(verb string, body any) (int, string, error) {
	payload, _ := json.Marshal(body)
	s.mu.Lock()
	candidates := append([]string{}, s.managers...)
	if s.leader != "" {
		candidates = append([]string{s.leader}, candidates...)
	}
	s.mu.Unlock()
	client := &http.Client{Timeout: 35 * time.Second}
	var lastErr error
	for _, m := range candidates {
		url := fmt.Sprintf("http://%s/v1/shardmaps/%s/%s/%s", m, s.ns, s.shardMap, verb)
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		// The pod's projected token (audience kshard.io/operator), re-read on every call: the kubelet rotates it.
		if file := os.Getenv("KSHARD_MANAGER_TOKEN_FILE"); file != "" {
			if token, err := os.ReadFile(file); err == nil {
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		var answer struct {
			Leader string `json:"leader"`
		}
		raw := new(bytes.Buffer)
		_, _ = raw.ReadFrom(resp.Body)
		resp.Body.Close()
		_ = json.Unmarshal(raw.Bytes(), &answer)
		if resp.StatusCode == 503 && strings.Contains(raw.String(), "NotLeader") {
			if answer.Leader != "" {
				s.mu.Lock()
				s.leader = answer.Leader
				s.mu.Unlock()
			}
			lastErr = fmt.Errorf("%s: not the leader", m)
			continue
		}
		s.mu.Lock()
		s.leader = m
		s.mu.Unlock()
		return resp.StatusCode, raw.String(), nil
	}
	return 0, "", lastErr
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	s := &stub{
		pod: envvar.Must("POD_NAME"), uid: envvar.Must("POD_UID"), ns: envvar.Must("POD_NAMESPACE"),
		shardMap: envvar.Must("KSHARD_SHARD_MAP"), version: os.Getenv("KSHARD_VERSION"),
		managers: strings.Split(envvar.Must("KSHARD_MANAGERS"), ","),
		owned:    map[int]uint64{}, fences: map[int]uint64{},
	}
	s.address = net.JoinHostPort(envvar.Must("POD_IP"), "7101")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", s.ping)
	mux.HandleFunc("POST /v1/shards/assign", s.shardsCall(s.assign))
	mux.HandleFunc("POST /v1/shards/unassign", s.shardsCall(s.unassign))
	mux.HandleFunc("GET /debug/stats", s.stats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	server := &http.Server{Addr: s.address, Handler: mux}
	listener, err := net.Listen("tcp", s.address)
	if err != nil {
		log.Fatalf("listen %s: %v", s.address, err)
	}
	go func() { _ = server.Serve(listener) }()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	registered := make(chan struct{})
	go func() {
		for {
			status, body, err := s.call("register", map[string]string{
				"pod": s.pod, "uid": s.uid, "address": s.address, "version": s.version})
			if err == nil && status == 200 {
				log.Printf("registered: %s", body)
				close(registered)
				return
			}
			log.Printf("register: status %d %s %v; retrying", status, body, err)
			select {
			case <-stop:
				os.Exit(0)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	<-stop
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	select {
	case <-registered:
	default:
		log.Printf("stopping before registration")
		os.Exit(0)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		status, body, err := s.call("unregister", map[string]string{"pod": s.pod, "uid": s.uid})
		if err == nil && status == 200 {
			log.Printf("unregistered: %s", body)
			break
		}
		log.Printf("unregister: status %d %s %v; retrying", status, body, err)
		time.Sleep(500 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = server.Shutdown(ctx)
}
