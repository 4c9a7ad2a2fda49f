package clustertest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/cluster/fault"
	"kshard.local/e2e/cluster/nodestate"
	"kshard.local/e2e/support/podstate"
)

// Partitions and orphans: the faults of the network and of the node's link to the API server.

const (
	apiAddr     = "10.244.0.1:6443"  // the API server, as pods reach it
	kubeletAddr = "10.244.0.1:10250" // another port of the node's address
)

// partition api cuts the pod off from the API server's port only: probes (from the node's
// address) and the node's other ports still work, so the pod stays Ready; heal restores it.
func TestFaultPartitionFromTheAPIServerKeepsProbes(t *testing.T) {
	cs, ns, n := faultCase(t)
	pod := faultPod(t, cs, ns, "cutoff", true)
	ip := pod.Status.PodIP
	if err := fromPod(ip, "dial", apiAddr, time.Second); err != nil {
		t.Fatalf("the pod cannot reach the API server before the partition: %v", err)
	}
	if err := n.Partition(ns, pod.Name, []fault.Target{fault.APIServer()}); err != nil {
		t.Fatal(err)
	}
	if err := fromPod(ip, "dial", apiAddr, time.Second); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a partitioned pod connected to the API server (or failed otherwise): %v", err)
	}
	if err := fromPod(ip, "dial", kubeletAddr, time.Second); err != nil {
		t.Errorf("partition api cut the node's other ports too: %v", err)
	}
	// The probes (every second, from the node's address) keep passing: through more than the
	// readiness probe's failure threshold (3 periods), the pod stays Ready and is not restarted.
	holdsFor(t, 4*time.Second, "the partitioned pod to stay Ready, reachable from the node", func() (bool, string) {
		if err := getWithin(ip, 2*time.Second); err != nil {
			return false, "the node cannot reach the probe port: " + err.Error()
		}
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podstate.Ready(p) && p.Status.ContainerStatuses[0].RestartCount == 0, describePods([]v1.Pod{*p})
	})
	if hostRules(t) != "" {
		t.Errorf("partition changed the host's iptables: %s", hostRules(t))
	}
	for i := 0; i < 2; i++ { // a second heal has nothing left to do
		if err := n.Heal(ns, pod.Name); err != nil {
			t.Fatal(err)
		}
	}
	if rules, err := podByUID(t, n, string(pod.UID)).Partitions(); err != nil || len(rules) != 0 {
		t.Errorf("rules left after heal: %v %v", rules, err)
	}
	if err := fromPod(ip, "dial", apiAddr, time.Second); err != nil {
		t.Errorf("the healed pod cannot reach the API server: %v", err)
	}
}

// hostRules are the fault tool's iptables rules in the host's namespace (there must be none; the
// node's own service rule, KSHARD-NODE-SERVICES, is not one of them).
func hostRules(t *testing.T) string {
	out, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v %s", err, out)
	}
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "KSHARD-FAULT") {
			ours = append(ours, line)
		}
	}
	return strings.Join(ours, "\n")
}

// partition <pod IP> cuts TCP between two pods both ways, a connection established before the
// partition included; the rest of their network works; heal restores it.
func TestFaultPartitionBetweenPodsCutsBothWays(t *testing.T) {
	cs, ns, n := faultCase(t)
	a, b := faultPod(t, cs, ns, "left", false), faultPod(t, cs, ns, "right", false)
	aURL, bURL := "http://"+a.Status.PodIP+":8080/", "http://"+b.Status.PodIP+":8080/"
	fromPodReused(t, a.Status.PodIP, bURL)
	if !fromPodReused(t, a.Status.PodIP, bURL) {
		t.Fatal("the second fetch from left to right did not reuse the first one's connection")
	}
	target, err := fault.ParseTarget(b.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Partition(ns, a.Name, []fault.Target{target}); err != nil {
		t.Fatal(err)
	}
	// The kept connection from left to right is dead (the request goes out on it and nothing
	// comes back), new ones time out, and right cannot reach left either.
	err = fromPod(a.Status.PodIP, "fetch", bURL, time.Second)
	if err == nil || !strings.Contains(err.Error(), "reused=true") {
		t.Errorf("over the established connection: want a timeout on the reused connection, got %v", err)
	}
	if err := fromPod(a.Status.PodIP, "dial", b.Status.PodIP+":8080", time.Second); err == nil {
		t.Error("left connected to right across the partition")
	}
	if err := fromPod(b.Status.PodIP, "dial", a.Status.PodIP+":8080", time.Second); err == nil {
		t.Error("right connected to left across the partition")
	}
	if err := fromPod(a.Status.PodIP, "dial", kubeletAddr, time.Second); err != nil {
		t.Errorf("the partition from right cut left off from the node: %v", err)
	}
	if err := n.Heal(ns, a.Name); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "left and right to reach each other after heal", func() (bool, string) {
		e1, e2 := fromPod(a.Status.PodIP, "fetch", bURL, time.Second), fromPod(b.Status.PodIP, "fetch", aURL, time.Second)
		return e1 == nil && e2 == nil, fmt.Sprintf("left to right: %v; right to left: %v", e1, e2)
	})
}

// orphan, then a force delete: the API forgets the pod while its node, cut off, keeps its process
// running and answering; release reconnects the node, whose kubelet finds the pod deleted and
// ends it as it ends any deleted pod (SIGTERM first); Release returns when it is gone. A pod of
// the same name then starts afresh.
func TestFaultOrphanRunsOnAfterForceDeleteUntilReleased(t *testing.T) {
	cs, ns, n := faultCase(t)
	old := faultPod(t, cs, ns, "split", true)
	oldPID := mainPID(t, n, old.UID, "app")
	if out, err := faultScript(t, "orphan", ns, old.Name); err != nil {
		t.Fatalf("fault.sh orphan: %v %s", err, out)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx(t), old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the force-deleted pod to be gone from the API", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describePods([]v1.Pod{*p})
	})
	holdsFor(t, 3*time.Second, "the orphan to run on as itself after its deletion", func() (bool, string) {
		var who map[string]string
		if err := getJSON("http://"+old.Status.PodIP+":8080/", &who); err != nil || who["uid"] != string(old.UID) {
			return false, fmt.Sprintf("%v %v", who, err)
		}
		if e := findEvent(lifeEvents(t, n, string(old.UID), "app"), nodestate.EventExit, oldPID); e != nil {
			return false, fmt.Sprintf("its process exited: %+v", e)
		}
		return true, ""
	})
	if p, err := n.Pod(ns, "split"); err != nil || p.UID != string(old.UID) || !p.Orphaned() {
		t.Errorf("the name should mean the orphan: %v %v", p, err)
	}

	if out, err := faultScript(t, "release", ns, "split"); err != nil {
		t.Fatalf("fault.sh release: %v %s", err, out)
	}
	// Release returns once the orphan's containers are gone; the exit is logged.
	if e := exitOf(t, n, string(old.UID), "app", oldPID); *e.Signal != 0 || *e.ExitCode != 0 {
		t.Errorf("the released orphan's exit: code %d, signal %d; want 0, 0 (it exits on SIGTERM)", *e.ExitCode, *e.Signal)
	}
	if words, _ := logEvents(t, ns, "split", "app", "EXIT"); indexOf(words, "SIGTERM") < 0 {
		t.Errorf("the kubelet ends a released orphan with SIGTERM; the log has %v", words)
	}
	waitFor(t, 30*time.Second, "the released orphan's sandbox to go", func() (bool, string) {
		_, err := n.PodByUID(string(old.UID))
		return err != nil, fmt.Sprint(err)
	})
	if err := getWithin(old.Status.PodIP, time.Second); err == nil {
		t.Error("the released orphan's IP still answers")
	}
	if repl := faultPod(t, cs, ns, "split", true); repl.UID == old.UID {
		t.Errorf("the new pod has the orphan's uid")
	}
}
