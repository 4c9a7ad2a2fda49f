package scenariotest

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/cluster/fault"
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
