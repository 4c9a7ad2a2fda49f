package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type containerKind int

const (
	kindInit    containerKind = iota // runs to completion before the next one starts
	kindSidecar                      // init container with restartPolicy Always: starts first, stops last
	kindRegular
)

// Kubelet's crash-loop back-off: the first restart is immediate, then 10 s doubling to 5 min; a
// container that ran 10 minutes starts over.
const (
	backoffBase  = 10 * time.Second
	backoffMax   = 5 * time.Minute
	backoffReset = 10 * time.Minute
)

// runner runs one container of a pod as a process: start, probes, exit, restart with back-off, and
// graceful stop. Its state feeds the pod's containerStatuses.
type runner struct {
	w    *podWorker
	spec v1.Container
	kind containerKind

	stopCh   chan struct{} // closed when the pod stops: no more restarts
	stopOnce sync.Once
	doneCh   chan struct{} // closed when run returns

	mu           sync.Mutex
	state        v1.ContainerState
	last         v1.ContainerState
	restartCount int32
	ready        bool
	started      bool
	succeeded    bool // an init container that exited 0, or a regular one that will not restart
	failed       bool // will not run again after a failure (restartPolicy)
	cmd          *exec.Cmd
	exited       chan struct{} // closed when the current process exited
	imageID      string
	image        string
}

func newRunner(w *podWorker, spec v1.Container, kind containerKind) *runner {
	return &runner{
		w: w, spec: spec, kind: kind, image: spec.Image,
		stopCh: make(chan struct{}), doneCh: make(chan struct{}),
		state: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	}
}

func (r *runner) stopping() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

// pause waits d, or less if the pod stops; it reports whether the full time passed.
func (r *runner) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopCh:
		return false
	}
}

func (r *runner) update(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	r.w.notifyChanged()
}

func (r *runner) setWaiting(reason, msg string) {
	r.update(func() {
		if r.state.Terminated != nil {
			r.last = r.state
		}
		r.state = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
		r.ready, r.started = false, false
	})
}

// run is the container's life; it returns when the container will not run again.
func (r *runner) run() {
	defer close(r.doneCh)
	failures := 0
	for !r.stopping() {
		startedAt, exitCode, err := r.runOnce()
		if err != nil {
			// Could not start: wait and try again (images may be built, secrets created later).
			if r.pause(5 * time.Second) {
				continue
			}
			return
		}
		if r.stopping() {
			return
		}
		restart := false
		switch {
		case r.kind == kindSidecar:
			restart = true
		case r.kind == kindInit && exitCode == 0:
			r.update(func() { r.succeeded = true })
			return
		case r.kind == kindInit:
			restart = r.w.restartPolicy() != v1.RestartPolicyNever
		default:
			switch r.w.restartPolicy() {
			case v1.RestartPolicyAlways:
				restart = true
			case v1.RestartPolicyOnFailure:
				restart = exitCode != 0
			}
		}
		if !restart {
			r.update(func() {
				if exitCode == 0 {
					r.succeeded = true
				} else {
					r.failed = true
				}
			})
			return
		}
		if time.Since(startedAt) > backoffReset {
			failures = 0
		}
		delay := time.Duration(0)
		if failures > 0 {
			delay = backoffBase << uint(failures-1)
			if delay > backoffMax || delay <= 0 {
				delay = backoffMax
			}
		}
		failures++
		if delay > 0 {
			msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
				delay, r.spec.Name, r.w.name, r.w.ns, r.w.uid)
			r.setWaiting("CrashLoopBackOff", msg)
			r.w.event(v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s", r.spec.Name)
			if !r.pause(delay) {
				return
			}
		}
		r.update(func() { r.restartCount++ })
	}
}

// runOnce starts the process and waits for it to exit. err means it could not be started.
func (r *runner) runOnce() (startedAt time.Time, exitCode int32, err error) {
	w := r.w
	exe, err := w.a.Images.Resolve(r.spec.Image)
	if err != nil {
		r.setWaiting("ErrImagePull", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", r.spec.Image, err)
		return time.Time{}, 0, err
	}
	argv, err := resolveArgv(exe, r.spec.Command, r.spec.Args)
	var env []string
	var vals map[string]string
	if err == nil {
		env, vals, err = w.buildEnv(w.ctx, w.podForEnv(), &r.spec)
	}
	var mounts []Mount
	if err == nil {
		mounts, err = w.mountsFor(&r.spec)
	}
	if err != nil {
		r.setWaiting("CreateContainerConfigError", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Error: %v", err)
		return time.Time{}, 0, err
	}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	for i := 1; i < len(argv); i++ {
		argv[i] = expand(argv[i], lookup)
	}
	cmd, forkedAt, err := r.startProcess(ProcessSpec{NetNSPath: w.sandbox.NetNSPath(), Mounts: mounts, Hostname: w.hostname(),
		WorkingDir: r.spec.WorkingDir, Argv: argv, Env: env})
	if err != nil {
		r.setWaiting("RunContainerError", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Error: %v", err)
		return time.Time{}, 0, err
	}
	startedAt = time.Now()
	r.recordStart(forkedAt, cmd.Process.Pid)
	exited := make(chan struct{})
	r.update(func() {
		if r.state.Terminated != nil {
			r.last = r.state
		}
		r.state = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}
		r.cmd, r.exited, r.imageID = cmd, exited, "file://"+exe
		r.ready, r.started = false, false
	})
	w.event(v1.EventTypeNormal, "Started", "Started container %s", r.spec.Name)

	probeCtx, cancelProbes := context.WithCancel(w.ctx)
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait(); close(exited) }()
	go r.lifecycle(probeCtx)
	werr := <-waitErr
	cancelProbes()
	finishedAt := time.Now()
	// Like a container runtime, the container ends with its main process: kill what it left.
	cg, _ := w.a.Cgroups.ContainerDir(string(w.uid), r.spec.Name)
	_ = Kill(cg)

	exitCode, reason, signal := exitStatus(cmd, werr)
	// After the wait and the kill: nothing of this container runs any more.
	r.recordExit(time.Now(), cmd.Process.Pid, exitCode, signal)
	r.update(func() {
		r.state = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: exitCode, Signal: signal, Reason: reason,
			StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(finishedAt),
			ContainerID: r.containerID(cmd),
		}}
		r.cmd, r.ready, r.started = nil, false, false
	})
	return startedAt, exitCode, nil
}

func exitStatus(cmd *exec.Cmd, err error) (code int32, reason string, signal int32) {
	ps := cmd.ProcessState
	if ps == nil {
		return 128, "Error", 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal()), "Error", int32(ws.Signal())
	}
	code = int32(ps.ExitCode())
	if code == 0 && err == nil {
		return 0, "Completed", 0
	}
	return code, "Error", 0
}

func (r *runner) containerID(cmd *exec.Cmd) string {
	if cmd == nil || cmd.Process == nil {
		return ""
	}
	return fmt.Sprintf("kshard://%s/%s/%d", r.w.uid, r.spec.Name, cmd.Process.Pid)
}

// startProcess re-executes the agent as "run-container" in a new mount namespace, with the
// container's output appended to .cluster/logs/<namespace>/<pod>/<container>.log. forkedAt is
// taken just before the fork: the process did nothing before it.
func (r *runner) startProcess(spec ProcessSpec) (cmd *exec.Cmd, forkedAt time.Time, err error) {
	w := r.w
	cg, err := w.a.Cgroups.ContainerDir(string(w.uid), r.spec.Name)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cgroup: %w", err)
	}
	// A new process starts thawed, as a new container would, even if the fault tool froze the
	// previous one (a frozen process can still be killed, and is restarted).
	if err := Thaw(cg); err != nil {
		return nil, time.Time{}, fmt.Errorf("cgroup: %w", err)
	}
	spec.CgroupDir = cg
	specPath, err := w.writeSpec(r.spec.Name, spec)
	if err != nil {
		return nil, time.Time{}, err
	}
	logPath := w.a.logPath(w.ns, w.name, r.spec.Name)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, time.Time{}, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer logFile.Close()
	cmd = exec.Command(w.a.SelfExe, "run-container", specPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS, Setpgid: true}
	forkedAt = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, time.Time{}, err
	}
	return cmd, forkedAt, nil
}

// lifecycle runs the postStart hook and the probes of one process until ctx ends.
func (r *runner) lifecycle(ctx context.Context) {
	w := r.w
	if h := r.spec.Lifecycle; h != nil && h.PostStart != nil {
		if err := w.runHandler(ctx, &r.spec, h.PostStart); err != nil {
			w.event(v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			r.kill(w.gracePeriod(nil), "FailedPostStartHook")
			return
		}
	}
	if p := r.spec.StartupProbe; p != nil {
		if !r.probeUntil(ctx, p, "Startup") {
			return
		}
	}
	r.update(func() {
		r.started = true
		if r.spec.ReadinessProbe == nil {
			r.ready = true
		}
	})
	if p := r.spec.ReadinessProbe; p != nil {
		go r.probeLoop(ctx, p, "Readiness", func(ok bool) { r.update(func() { r.ready = ok }) })
	}
	if p := r.spec.LivenessProbe; p != nil {
		go r.probeLoop(ctx, p, "Liveness", func(ok bool) {
			if !ok {
				w.event(v1.EventTypeNormal, "Killing", "Container %s failed liveness probe, will be restarted", r.spec.Name)
				r.kill(w.gracePeriod(p.TerminationGracePeriodSeconds), "liveness")
			}
		})
	}
}

// kill stops the current process the kubelet's way: preStop hook, SIGTERM, SIGKILL at the end of
// the grace period; with no grace period, SIGKILL at once (no hook, no SIGTERM). It returns when
// the process has exited.
func (r *runner) kill(grace time.Duration, why string) {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	if grace <= 0 {
		r.killNow(cmd, exited)
		return
	}
	deadline := time.Now().Add(grace)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if h := r.spec.Lifecycle; h != nil && h.PreStop != nil {
		if err := r.w.runHandler(ctx, &r.spec, h.PreStop); err != nil {
			r.w.event(v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return
	case <-ctx.Done():
	}
	r.killNow(cmd, exited)
}

// killNow SIGKILLs every process of the container and waits for the main one's exit.
func (r *runner) killNow(cmd *exec.Cmd, exited <-chan struct{}) {
	cg, _ := r.w.a.Cgroups.ContainerDir(string(r.w.uid), r.spec.Name)
	if err := Kill(cg); err != nil {
		_ = cmd.Process.Kill()
	}
	<-exited
}

// stop ends the container for good (pod deletion): no restart after this.
func (r *runner) stop(deadline time.Time) {
	r.stopOnce.Do(func() { close(r.stopCh) })
	grace := time.Until(deadline)
	if grace < 0 {
		grace = 0
	}
	r.kill(grace, "stop")
	<-r.doneCh
}

// status renders the container's status for the API.
func (r *runner) status() v1.ContainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	started := r.started
	st := v1.ContainerStatus{
		Name: r.spec.Name, State: *r.state.DeepCopy(), LastTerminationState: *r.last.DeepCopy(),
		Ready: r.ready, RestartCount: r.restartCount, Image: r.image, ImageID: r.imageID,
		Started: &started,
	}
	if r.cmd != nil {
		st.ContainerID = r.containerID(r.cmd)
	} else if t := r.state.Terminated; t != nil {
		st.ContainerID = t.ContainerID
	}
	return st
}

func (r *runner) snapshot() (running, ready, started, succeeded, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.Running != nil, r.ready, r.started, r.succeeded, r.failed
}
