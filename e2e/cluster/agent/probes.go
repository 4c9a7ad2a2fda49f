package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func seconds(v int32, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

// probeLoop runs a readiness or liveness probe every period until ctx ends, reporting each change
// of the outcome once the success or failure threshold is reached (the kubelet's rules).
func (r *runner) probeLoop(ctx context.Context, p *v1.Probe, what string, report func(bool)) {
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return
	}
	period := seconds(p.PeriodSeconds, 10)
	successes, failures := 0, 0
	last := what == "Liveness" // liveness starts "alive", readiness "not ready"
	for {
		err := r.w.probe(ctx, &r.spec, &p.ProbeHandler, seconds(p.TimeoutSeconds, 1))
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			successes, failures = successes+1, 0
			if !last && successes >= int(max(p.SuccessThreshold, 1)) {
				last = true
				report(true)
			}
		} else {
			successes, failures = 0, failures+1
			if failures == 1 || failures%10 == 0 {
				r.w.event(v1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", what, err)
			}
			if last && failures >= int(max(p.FailureThreshold, 1)) {
				last = false
				report(false)
				if what == "Liveness" {
					return
				}
			}
		}
		if !sleepCtx(ctx, period) {
			return
		}
	}
}

// probeUntil runs the startup probe until it succeeds (true) or fails failureThreshold times, in
// which case the container is killed (false).
func (r *runner) probeUntil(ctx context.Context, p *v1.Probe, what string) bool {
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return false
	}
	failures := 0
	for {
		err := r.w.probe(ctx, &r.spec, &p.ProbeHandler, seconds(p.TimeoutSeconds, 1))
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			return true
		}
		failures++
		if failures >= int(max(p.FailureThreshold, 1)) {
			r.w.event(v1.EventTypeWarning, "Unhealthy", "%s probe failed %d times, the container will be restarted: %v", what, failures, err)
			r.kill(r.w.gracePeriod(p.TerminationGracePeriodSeconds), "startup")
			return false
		}
		if !sleepCtx(ctx, seconds(p.PeriodSeconds, 10)) {
			return false
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// probe runs one probe; nil is success.
func (w *podWorker) probe(ctx context.Context, c *v1.Container, h *v1.ProbeHandler, timeout time.Duration) error {
	switch {
	case h.HTTPGet != nil:
		return w.httpGet(ctx, c, h.HTTPGet, timeout)
	case h.TCPSocket != nil:
		port, err := resolvePort(c, h.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = w.podIP()
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return err
		}
		return conn.Close()
	case h.Exec != nil:
		return w.exec(ctx, c, h.Exec.Command, timeout)
	case h.GRPC != nil:
		return fmt.Errorf("grpc probes are not supported by this node agent")
	}
	return fmt.Errorf("probe has no handler")
}

// runHandler runs a lifecycle hook (postStart or preStop).
func (w *podWorker) runHandler(ctx context.Context, c *v1.Container, h *v1.LifecycleHandler) error {
	switch {
	case h.HTTPGet != nil:
		timeout := time.Until(deadlineOr(ctx, time.Now().Add(2*time.Minute)))
		return w.httpGet(ctx, c, h.HTTPGet, timeout)
	case h.Exec != nil:
		timeout := time.Until(deadlineOr(ctx, time.Now().Add(2*time.Minute)))
		return w.exec(ctx, c, h.Exec.Command, timeout)
	case h.Sleep != nil:
		sleepCtx(ctx, time.Duration(h.Sleep.Seconds)*time.Second)
		return nil
	case h.TCPSocket != nil:
		return fmt.Errorf("tcpSocket lifecycle hooks are deprecated and not supported")
	}
	return fmt.Errorf("lifecycle hook has no handler")
}

func deadlineOr(ctx context.Context, def time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return def
}

func resolvePort(c *v1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

// httpGet succeeds on a status in 200..399, like the kubelet (redirects are not followed).
func (w *podWorker) httpGet(ctx context.Context, c *v1.Container, g *v1.HTTPGetAction, timeout time.Duration) error {
	port, err := resolvePort(c, g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = w.podIP()
	}
	scheme := "http"
	if g.Scheme == v1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if parsed, err := url.Parse(g.Path); err == nil {
		u.Path, u.RawQuery = parsed.Path, parsed.RawQuery
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.33")
	for _, h := range g.HTTPHeaders {
		req.Header.Set(h.Name, h.Value)
	}
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, 10<<10)
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// exec runs a command inside the container's namespaces (same mounts, network and cgroup).
func (w *podWorker) exec(ctx context.Context, c *v1.Container, command []string, timeout time.Duration) error {
	if len(command) == 0 {
		return fmt.Errorf("exec with no command")
	}
	exe, err := w.a.Images.Resolve(c.Image)
	if err != nil {
		return err
	}
	argv, err := resolveArgv(exe, command, nil)
	if err != nil {
		return err
	}
	env, _, err := w.buildEnv(ctx, w.podForEnv(), c)
	if err != nil {
		return err
	}
	mounts, err := w.mountsFor(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cg, err := w.a.Cgroups.ContainerDir(string(w.uid), c.Name)
	if err != nil {
		return err
	}
	specPath, err := w.writeSpec("exec-"+c.Name, ProcessSpec{CgroupDir: cg, NetNSPath: w.sandbox.NetNSPath(), Hostname: w.hostname(),
		Mounts: mounts, WorkingDir: c.WorkingDir, Argv: argv, Env: env})
	if err != nil {
		return err
	}
	defer os.Remove(specPath)
	cmd := exec.CommandContext(ctx, w.a.SelfExe, "run-container", specPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS, Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("command %v: %v: %s", command, err, truncate(string(out), 200))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
