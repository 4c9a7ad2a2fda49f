package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kshard.local/e2e/cluster/nodestate"
)

// podWorker is the kubelet's work for one pod: sandbox, volumes, init containers and native
// sidecars in order, the containers, status, and graceful termination followed by the final delete.
type podWorker struct {
	a        *Agent
	uid      types.UID
	ns, name string
	dir      string // <state>/pods/<uid>
	ctx      context.Context
	cancel   context.CancelFunc

	updateCh  chan struct{} // the pod object changed
	changedCh chan struct{} // a container's state changed (for the lifecycle)
	statusCh  chan struct{} // anything changed (for the status writer)
	specSeq   atomic.Int64

	mu          sync.Mutex
	pod         *v1.Pod
	gone        bool // deleted from the API without us (force delete)
	sandbox     *Sandbox
	volumes     *volumeSet
	initRunners []*runner
	runners     []*runner
	initFailed  bool
	terminated  bool // every container stopped for good
	startTime   metav1.Time

	orphanHeld  atomic.Bool // the fault tool's orphan marker was acknowledged (orphans.go)
	releaseSeen atomic.Bool // ... and removed after the pod was gone from the API
}

func newPodWorker(a *Agent, pod *v1.Pod) *podWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWorker{
		a: a, uid: pod.UID, ns: pod.Namespace, name: pod.Name,
		dir: nodestate.PodDir(a.Cfg.StateDir, string(pod.UID)),
		ctx: ctx, cancel: cancel, pod: pod,
		updateCh: make(chan struct{}, 1), changedCh: make(chan struct{}, 1), statusCh: make(chan struct{}, 1),
		startTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	w.volumes = newVolumeSet(w)
	// kill-pod.sh and the fault tool find a pod's cgroups from its name through this file,
	// without the API.
	if err := os.MkdirAll(w.dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(w.dir, nodestate.PodNameFile), []byte(pod.Namespace+"/"+pod.Name+"\n"), 0o644)
	}
	return w
}

// recordSandbox writes the sandbox's network namespace and IP into the pod's directory, for the
// fault tool.
func (w *podWorker) recordSandbox(sb *Sandbox) {
	_ = os.WriteFile(filepath.Join(w.dir, nodestate.PodNetNSFile), []byte(sb.NetNS+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(w.dir, nodestate.PodIPFile), []byte(sb.IP.String()+"\n"), 0o644)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *podWorker) notifyChanged() {
	signal(w.changedCh)
	signal(w.statusCh)
}

// setPod records the latest object from the informer (nil: deleted from the API).
func (w *podWorker) setPod(pod *v1.Pod) {
	w.mu.Lock()
	if pod == nil {
		w.gone = true
		if w.orphaned() {
			klog.InfoS("orphaned pod deleted from the API; its containers keep running until released",
				"pod", w.ns+"/"+w.name, "uid", w.uid)
		}
	} else {
		w.pod = pod
	}
	w.mu.Unlock()
	signal(w.updateCh)
	w.notifyChanged()
}

func (w *podWorker) current() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.gone
}

// deleting says whether the pod is to be stopped: deleted or being deleted, and not orphaned (an
// orphan's node does not learn of its deletion).
func (w *podWorker) deleting() bool {
	if w.orphaned() {
		return false
	}
	pod, gone := w.current()
	return gone || pod.DeletionTimestamp != nil
}

func (w *podWorker) restartPolicy() v1.RestartPolicy {
	pod, _ := w.current()
	if pod.Spec.RestartPolicy == "" {
		return v1.RestartPolicyAlways
	}
	return pod.Spec.RestartPolicy
}

func (w *podWorker) podIP() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sandbox == nil {
		return ""
	}
	return w.sandbox.IP.String()
}

// podForEnv is the pod as the downward API sees it: with this node's view of its IPs.
func (w *podWorker) podForEnv() *v1.Pod {
	pod, _ := w.current()
	p := pod.DeepCopy()
	p.Status.PodIP = w.podIP()
	p.Status.HostIP = w.a.Cfg.NodeIP
	return p
}

// hostname is the pod's hostname: spec.hostname, else its name (truncated to 63 bytes like the kubelet).
func (w *podWorker) hostname() string {
	pod, _ := w.current()
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// gracePeriod is a probe's own grace period if it has one, else the pod's.
func (w *podWorker) gracePeriod(probeGrace *int64) time.Duration {
	if probeGrace != nil {
		return time.Duration(*probeGrace) * time.Second
	}
	pod, _ := w.current()
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// event records an Event on the pod, as a kubelet does; an orphan's node cannot.
func (w *podWorker) event(kind, reason, format string, args ...any) {
	if w.orphaned() {
		return
	}
	pod, _ := w.current()
	w.a.Recorder.Eventf(pod, kind, reason, format, args...)
}

func (w *podWorker) writeSpec(name string, spec ProcessSpec) (string, error) {
	path := filepath.Join(w.dir, "containers", fmt.Sprintf("%s-%d.json", name, w.specSeq.Add(1)))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, raw, 0o600)
}

// mountsFor lists the container's bind mounts, parents before children, creating their mount
// points on the host where missing (recorded, so that cluster-down removes them).
func (w *podWorker) mountsFor(c *v1.Container) ([]Mount, error) {
	pod, _ := w.current()
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []Mount
	for _, vm := range c.VolumeMounts {
		vol, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q names no volume of the pod", vm.Name)
		}
		src, ok := w.volumes.dir(vm.Name)
		if !ok {
			return nil, fmt.Errorf("volume %q is not ready", vm.Name)
		}
		if vm.SubPath != "" {
			if filepath.IsAbs(vm.SubPath) || strings.Contains("/"+vm.SubPath+"/", "/../") {
				return nil, fmt.Errorf("volumeMount %q: invalid subPath %q", vm.Name, vm.SubPath)
			}
			src = filepath.Join(src, vm.SubPath)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
		}
		if err := w.a.ensureMountpoint(vm.MountPath, st.IsDir()); err != nil {
			return nil, err
		}
		mounts = append(mounts, Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly || readOnlyVolume(vol)})
	}
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
	})
	return mounts, nil
}

func (vs *volumeSet) dir(name string) (string, bool) {
	vs.w.mu.Lock()
	defer vs.w.mu.Unlock()
	d, ok := vs.dirs[name]
	return d, ok
}

// retry runs f every interval until it succeeds or the pod is being deleted (false).
func (w *podWorker) retry(interval time.Duration, f func() error, onErr func(error)) bool {
	for {
		if w.deleting() {
			return false
		}
		err := f()
		if err == nil {
			return true
		}
		onErr(err)
		select {
		case <-time.After(interval):
		case <-w.updateCh:
		}
	}
}

// waitFor blocks until cond holds (true) or the pod is being deleted (false).
func (w *podWorker) waitFor(cond func() bool) bool {
	for {
		if w.deleting() {
			return false
		}
		if cond() {
			return true
		}
		select {
		case <-w.changedCh:
		case <-w.updateCh:
		case <-time.After(time.Second):
		}
	}
}

// run is the pod's whole life on this node.
func (w *podWorker) run() {
	defer w.a.forget(w.uid)
	go w.statusLoop()
	if w.start() {
		w.supervise()
	}
	w.terminate()
}

// start brings the pod up to the point where its regular containers run; false when it was
// deleted (or its init containers failed for good) before that.
func (w *podWorker) start() bool {
	id := strings.ReplaceAll(string(w.uid), "-", "")[:12]
	ok := w.retry(2*time.Second, func() error {
		sb, err := w.a.Net.CreateSandbox(id)
		if err == nil {
			w.mu.Lock()
			w.sandbox = sb
			w.mu.Unlock()
			w.notifyChanged()
			w.recordSandbox(sb)
		}
		return err
	}, func(err error) {
		w.event(v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
	})
	if !ok {
		return false
	}
	lastMsg := ""
	ok = w.retry(2*time.Second, func() error {
		pod, _ := w.current()
		return w.syncVolumes(pod)
	}, func(err error) {
		if err.Error() != lastMsg {
			lastMsg = err.Error()
			w.event(v1.EventTypeWarning, "FailedMount", "MountVolume failed: %v", err)
		}
	})
	if !ok {
		return false
	}
	go w.refreshVolumes()
	pod, _ := w.current()
	for _, c := range pod.Spec.InitContainers {
		kind := kindInit
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			kind = kindSidecar
		}
		r := newRunner(w, c, kind)
		w.mu.Lock()
		w.initRunners = append(w.initRunners, r)
		w.mu.Unlock()
		go r.run()
		if !w.waitFor(func() bool {
			_, _, started, succeeded, failed := r.snapshot()
			if failed {
				return true
			}
			if kind == kindSidecar {
				return started
			}
			return succeeded
		}) {
			return false
		}
		if _, _, _, _, failed := r.snapshot(); failed {
			w.mu.Lock()
			w.initFailed = true
			w.mu.Unlock()
			w.event(v1.EventTypeWarning, "Failed", "Init container %s failed and the pod's restartPolicy is Never", c.Name)
			return false
		}
	}
	w.mu.Lock()
	for _, c := range pod.Spec.Containers {
		w.runners = append(w.runners, newRunner(w, c, kindRegular))
	}
	runners := w.runners
	w.mu.Unlock()
	for _, r := range runners {
		go r.run()
	}
	w.notifyChanged()
	return true
}

func (w *podWorker) syncVolumes(pod *v1.Pod) error {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	return w.volumes.sync(ctx, pod)
}

// refreshVolumes keeps secrets, configMaps, downward-API files and tokens current, as the kubelet's
// periodic resync does.
func (w *podWorker) refreshVolumes() {
	t := time.NewTicker(w.a.Cfg.VolumeResync)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		if w.orphaned() {
			continue // cut off from the API server: the files stay as they are
		}
		pod, _ := w.current()
		if err := w.syncVolumes(pod); err != nil && w.ctx.Err() == nil {
			klog.InfoS("volume refresh failed", "pod", klog.KObj(pod), "err", err)
		}
	}
}

// supervise waits until the pod is deleted or all its regular containers finished for good (then
// its sidecars are stopped too, as the kubelet does).
func (w *podWorker) supervise() {
	w.waitFor(func() bool {
		w.mu.Lock()
		runners := w.runners
		w.mu.Unlock()
		for _, r := range runners {
			if _, _, _, succeeded, failed := r.snapshot(); !succeeded && !failed {
				return false
			}
		}
		return true
	})
}

// terminate stops the containers (regular ones in parallel, then sidecars in reverse order),
// all within the grace period, removes the sandbox, and deletes the pod object for good.
func (w *podWorker) terminate() {
	pod, gone := w.current()
	grace := w.gracePeriod(nil)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if gone && grace > 2*time.Second {
		grace = 2 * time.Second
	}
	if gone && w.orphanHeld.Load() {
		// A released orphan whose pod is gone: the reconnected kubelet finds nothing to be
		// graceful for, and the pod's replacement may already run elsewhere.
		grace = 0
	}
	if pod.DeletionTimestamp != nil || gone {
		w.event(v1.EventTypeNormal, "Killing", "Stopping the pod's containers (grace period %s)", grace)
	}
	deadline := time.Now().Add(grace)
	w.mu.Lock()
	runners, initRunners := w.runners, w.initRunners
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func(r *runner) { defer wg.Done(); r.stop(deadline) }(r)
	}
	wg.Wait()
	for i := len(initRunners) - 1; i >= 0; i-- {
		initRunners[i].stop(deadline)
	}
	w.mu.Lock()
	w.terminated = true
	w.mu.Unlock()
	// Wait for deletion: a pod that finished on its own stays (Succeeded/Failed) until deleted.
	for !w.deleting() {
		w.syncStatus()
		select {
		case <-w.updateCh:
		case <-time.After(10 * time.Second):
		}
	}
	if err := w.a.Cgroups.RemovePod(string(w.uid)); err != nil {
		klog.ErrorS(err, "removing pod cgroups", "pod", klog.KObj(pod))
	}
	w.mu.Lock()
	sb := w.sandbox
	w.mu.Unlock()
	w.syncStatus()
	w.cancel()
	if sb != nil {
		w.a.Net.DeleteSandbox(sb)
	}
	_ = os.RemoveAll(w.dir)
	// The final delete, retried while the API server is unreachable.
	uid := w.uid
	zero := int64(0)
	for {
		if _, gone := w.current(); gone {
			return
		}
		err := w.a.Client.CoreV1().Pods(w.ns).Delete(context.Background(), w.name,
			metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return
		}
		klog.ErrorS(err, "final delete of pod failed; retrying", "pod", klog.KObj(pod))
		select {
		case <-w.updateCh:
		case <-time.After(2 * time.Second):
		}
	}
}
