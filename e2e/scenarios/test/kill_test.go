package scenariotest

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/cluster/fault"
	"kshard.local/e2e/scenarios/kube"
)

// podKiller SIGKILLs every process of a pod of the local cluster (fault.Pod.Crash, as
// `e2e/cluster/fault.sh crash` does), but from the test, so that it knows to the millisecond when
// the processes died and can keep them dead: the kubelet restarts killed containers
// (restartPolicy Always), and a crashed node's pod does not come back.
type podKiller struct{ pod *fault.Pod }

func newPodKiller(clusterDir, ns, name string) (*podKiller, error) {
	n, err := fault.Open(clusterDir)
	if err != nil {
		return nil, err
	}
	p, err := n.Pod(ns, name)
	if err != nil {
		return nil, err
	}
	return &podKiller{pod: p}, nil
}

// killerOf reads the counter's pod `name` and opens a podKiller on it.
func (s *suite) killerOf(c sc, name string) (*v1.Pod, *podKiller) {
	ctx, cancel := apiCtx()
	pod, err := s.cs.CoreV1().Pods(s.cfg.counterNS).Get(ctx, name, metav1.GetOptions{})
	cancel()
	if err != nil {
		c.fatalf("getting pod %s: %v", name, err)
	}
	killer, err := newPodKiller(s.cfg.clusterDir, s.cfg.counterNS, name)
	if err != nil {
		c.fatalf("%v", err)
	}
	return pod, killer
}

// kill SIGKILLs every process of every container of the pod; it returns how many containers had
// processes.
func (k *podKiller) kill() (int, error) { return k.pod.Crash() }

// removed says whether the kubelet has removed the pod (its cgroup is gone).
func (k *podKiller) removed() bool {
	_, err := fault.PodCgroup(k.pod.UID)
	return errors.Is(err, fault.ErrUnknownPod)
}

// keepDead kills whatever the kubelet restarts in the pod until stop is closed or the kubelet
// removed the pod; every kill that found processes is passed to onKill. done is closed at the end.
func (k *podKiller) keepDead(stop <-chan struct{}, onKill func(time.Time, int)) (done <-chan struct{}) {
	d := make(chan struct{})
	go func() {
		defer close(d)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if n, _ := k.kill(); n > 0 {
				onKill(time.Now(), n)
			}
			if k.removed() {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return d
}

// podKill is what killAndDelete saw of a pod's end.
type podKill struct {
	at time.Time // just before the kill
	// The last time the pod's object was seen without the kubelet's confirmation that nothing
	// of it runs any more (at first, the deletion's start: until then it was not even deleting).
	// A confirmation stays once given (a deleting pod's containers are not restarted).
	unconfirmed time.Time
	gone        time.Time // the object was seen gone
	restarts    int       // containers restarted by the kubelet and killed again
}

// killAndDelete SIGKILLs every process of the counter's pod `victim` and keeps them dead (its
// requests stop entering through it first), deletes the pod with its uid as precondition, and
// waits until its object is gone. Deaths are recorded.
func (s *suite) killAndDelete(c sc, victim string) podKill {
	ns := s.cfg.counterNS
	pod, killer := s.killerOf(c, victim)
	// Requests stop entering through the victim (a load balancer would notice later; requests
	// that entered through it before the kill are reported apart).
	s.pods.Exclude(victim)
	out := podKill{at: time.Now()}
	n, err := killer.kill()
	if err != nil || n == 0 {
		c.fatalf("killing the processes of pod %s: %d containers, %v", victim, n, err)
	}
	// The processes are dead once every container's cgroup.kill was written, not when the first
	// was: the containers die one after the other, and the app may still log an activation for a
	// message its sidecar handed it before the sidecar died. Intervals of the victim close at
	// this moment, which no other pod's activation can precede (its shards move later).
	s.recordDeath(victim, time.Now())
	// onKill runs on keepDead's goroutine; out is read again only after it ended (<-killing).
	stopKilling := make(chan struct{})
	killing := killer.keepDead(stopKilling, func(at time.Time, _ int) {
		s.recordDeath(victim, at)
		out.restarts++
	})
	c.logf("SIGKILLed the %d containers of pod %s", n, victim)

	uid := pod.UID
	out.unconfirmed = time.Now()
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	err = s.cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}})
	cancel()
	// A deleting pod's containers are not restarted: stop killing, so that the kills do not race
	// the kubelet's own stop of the containers (containerd then loses the shim: "ttrpc: closed").
	close(stopKilling)
	<-killing
	if err != nil {
		c.fatalf("deleting pod %s: %v", victim, err)
	}
	// Usually seconds. But containerd 1.6 can lose the kubelet's stop of a container whose
	// process it has not yet seen die (the shim exits under the call: "ttrpc: closed"); the
	// kubelet then kills it again only once the grace period has run out. Meanwhile the pod is
	// unconfirmed, and its shards rightly stay where they are.
	goneWithin := time.Minute
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		goneWithin += time.Duration(*g) * time.Second
	}
	c.waitUntil(goneWithin, "pod "+victim+"'s object is gone", func() (bool, string) {
		asked := time.Now()
		ctx, cancel := apiCtx()
		defer cancel()
		p, err := s.cs.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return true, ""
		}
		if err == nil && !kube.TerminationConfirmed(p) {
			out.unconfirmed = asked
		}
		return false, fmt.Sprintf("still there (%v)", err)
	})
	out.gone = time.Now()
	return out
}
