// Command go-counter is the counter example (examples/counter) written with kshard's Go SDK:
// entity type "counter" on the app port for the sidecar, and a public API (POST
// /counters/{id}/increment, GET /counters/{id}) that reaches any counter through the sidecar.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	kshard "kshard.io/sdk/go"
)

type options struct {
	appPort, publicPort, sidecarPort int
	pod, stateDir, eventLog          string
	shutdownGrace                    int
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// parseOptions reads the flags over the environment over the defaults, as kshard-counter does.
func parseOptions() options {
	var o options
	flag.IntVar(&o.appPort, "app-port", envInt("KSHARD_APP_PORT", 8080), "Port of the entity callbacks on 127.0.0.1 ($KSHARD_APP_PORT).")
	flag.IntVar(&o.publicPort, "public-port", envInt("COUNTER_PUBLIC_PORT", 8081), "Port of the public API on all addresses ($COUNTER_PUBLIC_PORT).")
	flag.IntVar(&o.sidecarPort, "sidecar-port", envInt("KSHARD_API_PORT", 7100), "Port of the sidecar's app API on 127.0.0.1 ($KSHARD_API_PORT).")
	flag.StringVar(&o.pod, "pod", envOr("POD_NAME", "counter"), "This pod's name, written into events ($POD_NAME).")
	flag.StringVar(&o.stateDir, "state-dir", envOr("COUNTER_STATE_DIR", "/tmp/kshard-counter-state"), "Directory shared by all pods for counter state ($COUNTER_STATE_DIR).")
	flag.StringVar(&o.eventLog, "event-log", envOr("COUNTER_EVENT_LOG", ""), "Shared JSON-lines file of activations and stops ($COUNTER_EVENT_LOG).")
	flag.IntVar(&o.shutdownGrace, "shutdown-grace-seconds", envInt("COUNTER_SHUTDOWN_GRACE_SECONDS", 15), "After SIGTERM, how long requests in flight may still finish; longer than the ShardMap's sendTimeout ($COUNTER_SHUTDOWN_GRACE_SECONDS).")
	flag.Parse()
	return o
}

// publicAPI serves POST /counters/{id}/increment?by=n, GET /counters/{id} and GET /healthz.
type publicAPI struct{ sidecar *kshard.Client }

func writeError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (p publicAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/counters/"), "/")
	id, err := url.PathUnescape(parts[0])
	switch {
	case !strings.HasPrefix(r.URL.Path, "/counters/") || err != nil || id == "" || len(parts) > 2:
		writeError(w, 404, "NotFound", "no such path")
	case len(parts) == 2 && parts[1] == "increment" && r.Method == http.MethodPost:
		by := int64(1)
		if q := r.URL.Query().Get("by"); q != "" {
			if by, err = strconv.ParseInt(q, 10, 64); err != nil {
				writeError(w, 400, "BadRequest", "by must be an integer")
				return
			}
		}
		p.forward(w, r.Context(), id, fmt.Sprintf(`{"op":"increment","by":%d}`, by))
	case len(parts) == 1 && r.Method == http.MethodGet:
		p.forward(w, r.Context(), id, `{"op":"get"}`)
	default:
		writeError(w, 405, "MethodNotAllowed", "POST /counters/{id}/increment, GET /counters/{id}")
	}
}

// forward sends to the counter through the sidecar and answers with what came back.
func (p publicAPI) forward(w http.ResponseWriter, ctx context.Context, id, body string) {
	res, err := p.sidecar.Ask(ctx, "counter", id, []byte(body))
	var se *kshard.SidecarError
	switch {
	case errors.As(err, &se):
		w.Header().Set(kshard.HeaderError, se.Code)
		writeError(w, se.Status, se.Code, se.Message)
	case err != nil:
		writeError(w, 502, "SidecarUnavailable", err.Error())
	default:
		for name, values := range res.Header {
			if name != "Content-Length" && name != "Connection" {
				w.Header()[name] = values
			}
		}
		w.WriteHeader(res.Status)
		_, _ = w.Write(res.Body)
	}
}

func main() {
	o := parseOptions()
	logger := log.New(os.Stderr, "go-counter "+o.pod+": ", log.LstdFlags)
	_ = os.MkdirAll(o.stateDir, 0o755)
	c := &counters{store: store{o.stateDir}, pod: o.pod, active: map[string]*state{}}
	if o.eventLog != "" {
		f, err := os.OpenFile(o.eventLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			logger.Printf("cannot open the event log %s: %v", o.eventLog, err)
		}
		c.events = f
	}
	entities := kshard.NewServer(kshard.ServerOptions{})
	entities.Handle("counter", c)
	entities.OnReset(func(context.Context) error {
		logger.Printf("reset: every counter saved and forgotten")
		return nil
	})
	sidecar := kshard.NewClient(kshard.ClientOptions{
		BaseURL: fmt.Sprintf("http://127.0.0.1:%d", o.sidecarPort), Timeout: 60 * time.Second})
	servers := []*http.Server{
		{Addr: fmt.Sprintf("0.0.0.0:%d", o.publicPort), Handler: publicAPI{sidecar}},
		{Addr: fmt.Sprintf("127.0.0.1:%d", o.appPort), Handler: entities},
	}
	for _, s := range servers {
		go func(s *http.Server) {
			if err := s.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				logger.Fatalf("cannot serve %s: %v", s.Addr, err)
			}
		}(s)
	}
	logger.Printf("serving entities on 127.0.0.1:%d, public on 0.0.0.0:%d", o.appPort, o.publicPort)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	sig := <-stop
	// The sidecar stopped every counter in its drain before this signal; a public request may
	// still wait in the sidecar for its shard's new owner: refuse new connections, let those in
	// flight finish (the public server first).
	logger.Printf("stopping on %v, %d active counters", sig, c.activeCount())
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.shutdownGrace)*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
	logger.Printf("stopped")
}
