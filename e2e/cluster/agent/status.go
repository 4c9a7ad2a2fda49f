package agent

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// statusLoop writes the pod's status whenever something changed, and every few seconds anyway (a
// write that failed while the API server was away is retried).
func (w *podWorker) statusLoop() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.statusCh:
			// Coalesce a burst of changes into one write.
			select {
			case <-w.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		case <-t.C:
		}
		w.syncStatus()
	}
}

// syncStatus computes the status and writes it if it differs from the API's.
func (w *podWorker) syncStatus() {
	w.a.statusMu.Lock() // one status write at a time per node keeps the API server's load low
	defer w.a.statusMu.Unlock()
	pod, gone := w.current()
	if gone || w.orphaned() {
		return
	}
	status := w.computeStatus(pod)
	if equality.Semantic.DeepEqual(status, pod.Status) {
		return
	}
	p := pod.DeepCopy()
	p.Status = status
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	updated, err := w.a.Client.CoreV1().Pods(w.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		fresh, gerr := w.a.Client.CoreV1().Pods(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if gerr != nil || fresh.UID != w.uid {
			return
		}
		fresh.Status = w.computeStatus(fresh)
		updated, err = w.a.Client.CoreV1().Pods(w.ns).UpdateStatus(ctx, fresh, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.InfoS("pod status update failed (will retry)", "pod", klog.KObj(pod), "err", err)
		}
		return
	}
	w.mu.Lock()
	if w.pod.ResourceVersion == pod.ResourceVersion {
		w.pod = updated
	}
	w.mu.Unlock()
}

func condition(t v1.PodConditionType, ok bool, reason string) v1.PodCondition {
	st := v1.ConditionFalse
	if ok {
		st = v1.ConditionTrue
		reason = ""
	}
	return v1.PodCondition{Type: t, Status: st, Reason: reason}
}

// computeStatus is the pod's status as the kubelet would report it, with the conditions other
// components own (PodScheduled, DisruptionTarget, readiness gates) kept as they are.
func (w *podWorker) computeStatus(pod *v1.Pod) v1.PodStatus {
	w.mu.Lock()
	sb, initRunners, runners := w.sandbox, w.initRunners, w.runners
	initFailed, terminated := w.initFailed, w.terminated
	w.mu.Unlock()

	st := *pod.Status.DeepCopy()
	st.HostIP = w.a.Cfg.NodeIP
	st.HostIPs = []v1.HostIP{{IP: w.a.Cfg.NodeIP}}
	if st.StartTime == nil {
		st.StartTime = &w.startTime
	}
	if sb != nil {
		st.PodIP = sb.IP.String()
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	}

	byName := func(rs []*runner) map[string]*runner {
		m := map[string]*runner{}
		for _, r := range rs {
			m[r.spec.Name] = r
		}
		return m
	}
	initBy, regBy := byName(initRunners), byName(runners)
	initialized := true
	sidecarsReady := true
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		r, ok := initBy[c.Name]
		if !ok {
			initialized = false
			st.InitContainerStatuses = append(st.InitContainerStatuses, waitingStatus(c, "PodInitializing"))
			continue
		}
		cs := r.status()
		_, ready, started, succeeded, _ := r.snapshot()
		if r.kind == kindSidecar {
			initialized = initialized && started
			sidecarsReady = sidecarsReady && ready
		} else {
			initialized = initialized && succeeded
			cs.Ready = succeeded
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	allReady := len(pod.Spec.Containers) > 0
	anyStarted, allDone, allSucceeded := false, len(runners) > 0, true
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		r, ok := regBy[c.Name]
		if !ok {
			allReady, allDone = false, false
			reason := "PodInitializing"
			if sb == nil {
				reason = "ContainerCreating"
			}
			st.ContainerStatuses = append(st.ContainerStatuses, waitingStatus(c, reason))
			continue
		}
		cs := r.status()
		running, ready, _, succeeded, failed := r.snapshot()
		allReady = allReady && ready
		if running || cs.RestartCount > 0 || cs.State.Terminated != nil {
			anyStarted = true
		}
		if !succeeded && !failed {
			allDone = false
		}
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			allSucceeded = false
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}

	switch {
	case initFailed:
		st.Phase = v1.PodFailed
	case allDone || terminated && len(runners) > 0:
		st.Phase = v1.PodFailed
		if allSucceeded {
			st.Phase = v1.PodSucceeded
		}
	case initialized && anyStarted:
		st.Phase = v1.PodRunning
	default:
		st.Phase = v1.PodPending
	}
	terminal := st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed
	containersReady := allReady && sidecarsReady && !terminal
	ready := containersReady
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == v1.ConditionTrue {
				found = true
			}
		}
		ready = ready && found
	}
	notReadyReason := "ContainersNotReady"
	if terminal {
		notReadyReason = "PodCompleted"
	}
	ours := []v1.PodCondition{
		condition(v1.PodReadyToStartContainers, sb != nil && !terminated, ""),
		condition(v1.PodInitialized, initialized, "ContainersNotInitialized"),
		condition(v1.ContainersReady, containersReady, notReadyReason),
		condition(v1.PodReady, ready, notReadyReason),
	}
	if terminal && initialized {
		ours[1].Reason = "PodCompleted"
	}
	st.Conditions = mergeConditions(pod.Status.Conditions, ours)
	return normalise(st)
}

func waitingStatus(c v1.Container, reason string) v1.ContainerStatus {
	f := false
	return v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: &f,
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

// mergeConditions replaces our conditions in old, keeping lastTransitionTime when the status did
// not change, and keeps everyone else's.
func mergeConditions(old, ours []v1.PodCondition) []v1.PodCondition {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	mine := map[v1.PodConditionType]bool{}
	for _, c := range ours {
		mine[c.Type] = true
	}
	var out []v1.PodCondition
	for _, c := range old {
		if !mine[c.Type] {
			out = append(out, c)
		}
	}
	for _, c := range ours {
		c.LastTransitionTime = now
		for _, o := range old {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
				c.LastProbeTime = o.LastProbeTime
			}
		}
		out = append(out, c)
	}
	return out
}

// normalise gives the status the precision it has after a trip through the API (whole seconds),
// so that comparing it with the stored one finds no difference where there is none.
func normalise(st v1.PodStatus) v1.PodStatus {
	raw, err := json.Marshal(st)
	if err != nil {
		return st
	}
	var out v1.PodStatus
	if err := json.Unmarshal(raw, &out); err != nil {
		return st
	}
	return out
}
