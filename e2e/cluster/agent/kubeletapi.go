package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// serveKubeletAPI serves the part of the kubelet's API that the API server proxies for kubectl:
// container logs (kubectl logs [-f] [--tail]) and /healthz. Clients must present a certificate of
// the cluster CA (the API server's kubelet client certificate).
func (a *Agent) serveKubeletAPI(ctx context.Context) {
	cert, err := tls.LoadX509KeyPair(a.Cfg.KubeletCert, a.Cfg.KubeletKey)
	if err != nil {
		klog.ErrorS(err, "kubelet API disabled: cannot load its serving certificate")
		return
	}
	pool := x509.NewCertPool()
	if raw, err := os.ReadFile(a.Cfg.ClientCA); err == nil {
		pool.AppendCertsFromPEM(raw)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/containerLogs/", a.serveLogs)
	srv := &http.Server{
		Addr:      net.JoinHostPort(a.Cfg.NodeIP, strconv.Itoa(a.Cfg.KubeletPort)),
		Handler:   mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
		klog.ErrorS(err, "kubelet API stopped")
	}
}

// serveLogs answers GET /containerLogs/<namespace>/<pod>/<container>.
func (a *Agent) serveLogs(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		http.Error(w, "expected /containerLogs/<namespace>/<pod>/<container>", http.StatusBadRequest)
		return
	}
	for _, p := range parts {
		if p == "." || p == ".." {
			http.Error(w, "invalid path", http.StatusBadRequest)
			return
		}
	}
	q := r.URL.Query()
	f, err := os.Open(a.logPath(parts[0], parts[1], parts[2]))
	if err != nil {
		http.Error(w, fmt.Sprintf("no logs for container %q of pod %s/%s", parts[2], parts[0], parts[1]), http.StatusNotFound)
		return
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 {
		data = tailLines(data, n)
	}
	if n, err := strconv.Atoi(q.Get("limitBytes")); err == nil && n >= 0 && len(data) > n {
		data = data[:n]
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(data)
	if q.Get("follow") != "true" {
		return
	}
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
}

func tailLines(data []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	count := 0
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			count++
			if count == n {
				return data[i+1:]
			}
		}
	}
	return data
}
