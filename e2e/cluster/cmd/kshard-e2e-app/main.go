// Command kshard-e2e-app is the small HTTP program of the cluster's acceptance tests. It reports
// who it is, fetches URLs and dials addresses for reachability checks, reads files (volumes), calls the API server with
// its in-cluster configuration, and prints "PRESTOP" and "SIGTERM" lines (with a nanosecond
// timestamp) when its preStop hook is called and when it is asked to terminate. With TLS_DIR set it
// also serves TLS (tls.crt, tls.key of that directory) on TLS_PORT, where /mutate is a mutating
// admission webhook.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func logf(format string, args ...any) {
	fmt.Printf("%d %s\n", time.Now().UnixNano(), fmt.Sprintf(format, args...))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// mutate is a mutating admission webhook that labels every pod it sees
// e2e.kshard.io/mutated-by=<this pod>.
func mutate(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "expected an AdmissionReview", http.StatusBadRequest)
		return
	}
	var pod struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(review.Request.Object.Raw, &pod)
	var patch []map[string]any
	if pod.Metadata.Labels == nil {
		patch = append(patch, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{}})
	}
	patch = append(patch, map[string]any{"op": "add", "path": "/metadata/labels/e2e.kshard.io~1mutated-by", "value": os.Getenv("POD_NAME")})
	raw, _ := json.Marshal(patch)
	pt := admissionv1.PatchTypeJSONPatch
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, Patch: raw, PatchType: &pt}
	review.Request = nil
	logf("MUTATED a pod")
	writeJSON(w, review)
}

// queryTimeout is the request's timeout parameter (a Go duration), else def.
func queryTimeout(r *http.Request, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		return d
	}
	return def
}

// fetch GETs ?url= (within ?timeout=, 5 s by default) and answers with what it got; 502 with the
// error when it got nothing. X-Conn-Reused (and the error) say whether the request went over a
// connection kept from an earlier fetch, so a test can tell a cut established connection from a
// refused new one.
func fetch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout(r, 5*time.Second))
	defer cancel()
	var reused atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL.Query().Get("url"), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	w.Header().Set("X-Conn-Reused", strconv.FormatBool(reused.Load()))
	if err != nil {
		http.Error(w, fmt.Sprintf("reused=%v: %v", reused.Load(), err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// dial opens a TCP connection to ?addr= within ?timeout= (1 s by default) and closes it: 200 when
// it connected, 502 with the error otherwise.
func dial(w http.ResponseWriter, r *http.Request) {
	conn, err := net.DialTimeout("tcp", r.URL.Query().Get("addr"), queryTimeout(r, time.Second))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_ = conn.Close()
	_, _ = io.WriteString(w, "connected")
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		writeJSON(w, map[string]string{
			"pod": os.Getenv("POD_NAME"), "namespace": os.Getenv("POD_NAMESPACE"), "uid": os.Getenv("POD_UID"),
			"podIP": os.Getenv("POD_IP"), "version": os.Getenv("APP_VERSION"), "hostname": host,
		})
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		writeJSON(w, env)
	})
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(data)
	})
	mux.HandleFunc("/fetch", fetch)
	mux.HandleFunc("/dial", dial)
	mux.HandleFunc("/api-check", func(w http.ResponseWriter, _ *http.Request) {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			http.Error(w, "in-cluster config: "+err.Error(), http.StatusInternalServerError)
			return
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		v, err := client.Discovery().ServerVersion()
		if err != nil {
			http.Error(w, "server version: "+err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]string{"gitVersion": v.GitVersion, "host": cfg.Host})
	})
	mux.HandleFunc("/prestop", func(w http.ResponseWriter, _ *http.Request) {
		logf("PRESTOP")
		if d, err := time.ParseDuration(os.Getenv("PRESTOP_DELAY")); err == nil {
			time.Sleep(d)
		}
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/mutate", mutate)
	srv := &http.Server{Addr: ":" + port, Handler: mux}
	if dir := os.Getenv("TLS_DIR"); dir != "" {
		// Serve the same handlers over TLS as well (the admission webhook's port).
		tlsSrv := &http.Server{Addr: ":" + envOr("TLS_PORT", "8443"), Handler: mux}
		go func() {
			err := tlsSrv.ListenAndServeTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
			logf("ERROR tls server: %v", err)
			os.Exit(1)
		}()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		logf("SIGTERM")
		if d, err := time.ParseDuration(os.Getenv("TERM_DELAY")); err == nil {
			time.Sleep(d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	logf("START listening on :%s", port)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		logf("ERROR %v", err)
		os.Exit(1)
	}
	logf("EXIT")
}
