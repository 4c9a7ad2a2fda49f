package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"kshard.local/e2e/cluster/fault"
	"kshard.local/e2e/cluster/nodestate"
	"kshard.local/e2e/support/podstate"
)

// The fault tool (package fault, fault.sh) on real pods: each verb has the effect it promises,
// and containers.jsonl records the lives it ends and starts.

// faultCase is what each fault test starts from: clients, a fresh namespace, the node.
func faultCase(t *testing.T) (*kubernetes.Clientset, string, *fault.Node) {
	t.Helper()
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	n, err := fault.Open(env(t, "KSHARD_CLUSTER_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	return cs, ns, n
}

// faultPod runs one pod of the test program and waits until it is Ready. Without liveness, a
// freeze or a partition from the node cannot get it restarted.
func faultPod(t *testing.T, cs *kubernetes.Clientset, ns, name string, liveness bool) v1.Pod {
	t.Helper()
	c := appContainer("app", appImage, 8080)
	if !liveness {
		c.LivenessProbe = nil
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptrInt64(5), Containers: []v1.Container{c}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return waitReadyPods(t, cs, ns, "app="+name, 1, true, 60*time.Second)[0]
}

// mainPID is the host pid of the pod's running container.
func mainPID(t *testing.T, n *fault.Node, uid types.UID, container string) int {
	t.Helper()
	pid, err := podByUID(t, n, string(uid)).PID(container)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// lifeEvents are the containers.jsonl lines of one pod's container.
func lifeEvents(t *testing.T, n *fault.Node, uid, container string) []nodestate.ContainerEvent {
	t.Helper()
	all, err := n.ContainerEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []nodestate.ContainerEvent
	for _, e := range all {
		if e.UID == uid && e.Container == container {
			out = append(out, e)
		}
	}
	return out
}

func findEvent(events []nodestate.ContainerEvent, kind string, pid int) *nodestate.ContainerEvent {
	for i := range events {
		if events[i].Event == kind && events[i].PID == pid {
			return &events[i]
		}
	}
	return nil
}

// exitOf waits until containers.jsonl has the exit of that process and returns it.
func exitOf(t *testing.T, n *fault.Node, uid, container string, pid int) nodestate.ContainerEvent {
	t.Helper()
	var exit *nodestate.ContainerEvent
	waitFor(t, 10*time.Second, fmt.Sprintf("the exit of pid %d in containers.jsonl", pid), func() (bool, string) {
		events := lifeEvents(t, n, uid, container)
		exit = findEvent(events, nodestate.EventExit, pid)
		return exit != nil, fmt.Sprintf("%+v", events)
	})
	return *exit
}

// faultScript runs fault.sh and returns its combined output and error.
func faultScript(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{env(t, "KSHARD_CLUSTER_SCRIPTS") + "/fault.sh"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// fromPod asks the test program in the pod to GET a URL or dial an address (within timeout):
// nil when it got an answer or a connection.
func fromPod(podIP, what, target string, timeout time.Duration) error {
	param := "url"
	if what == "dial" {
		param = "addr"
	}
	url := fmt.Sprintf("http://%s:8080/%s?%s=%s&timeout=%s", podIP, what, param, target, timeout)
	return getJSON(url, nil)
}

// fromPodReused fetches url from the pod and says whether it went over a kept connection.
func fromPodReused(t *testing.T, podIP, url string) bool {
	t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("http://%s:8080/fetch?url=%s&timeout=2s", podIP, url))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pod %s fetching %s: %d", podIP, url, resp.StatusCode)
	}
	return resp.Header.Get("X-Conn-Reused") == "true"
}

// getWithin GETs / of a pod from the host, failing after timeout.
func getWithin(podIP string, timeout time.Duration) error {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(fmt.Sprintf("http://%s:8080/", podIP))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// kill SIGKILLs the container's processes; the kubelet restarts it (restartCount +1, exit 137), and
// containers.jsonl has the old process's exit with signal 9 and the new one's start, in that order.
// The pod's deletion ends the new process with its own exit (code 0 after SIGTERM), logged too.
func TestFaultKillRestartsTheContainerAndLogsItsLives(t *testing.T) {
	cs, ns, n := faultCase(t)
	pod := faultPod(t, cs, ns, "victim", true)
	oldPID := mainPID(t, n, pod.UID, "app")
	if out, err := faultScript(t, "kill", ns, pod.Name, "app"); err != nil {
		t.Fatalf("fault.sh kill: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "the killed container to be restarted and Ready", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status.ContainerStatuses
		if len(st) != 1 || st[0].RestartCount != 1 || !podstate.Ready(p) || st[0].LastTerminationState.Terminated == nil {
			return false, describePods([]v1.Pod{*p})
		}
		last := st[0].LastTerminationState.Terminated
		return last.ExitCode == 137, fmt.Sprintf("last termination %+v", last)
	})
	newPID := mainPID(t, n, pod.UID, "app")
	events := lifeEvents(t, n, string(pod.UID), "app")
	start, exit, restart := findEvent(events, nodestate.EventStart, oldPID), findEvent(events, nodestate.EventExit, oldPID),
		findEvent(events, nodestate.EventStart, newPID)
	if start == nil || exit == nil || restart == nil {
		t.Fatalf("containers.jsonl: want start and exit of pid %d, start of pid %d; have %+v", oldPID, newPID, events)
	}
	if *exit.Signal != 9 || *exit.ExitCode != 137 || exit.Namespace != ns || exit.Pod != pod.Name {
		t.Errorf("exit of the killed process: %+v (signal %d, code %d)", exit, *exit.Signal, *exit.ExitCode)
	}
	if !(start.TsUs <= exit.TsUs && exit.TsUs <= restart.TsUs) {
		t.Errorf("times out of order: start %d, exit %d, restart %d", start.TsUs, exit.TsUs, restart.TsUs)
	}

	if err := cs.CoreV1().Pods(ns).Delete(ctx(t), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := exitOf(t, n, string(pod.UID), "app", newPID); *e.Signal != 0 || *e.ExitCode != 0 {
		t.Errorf("exit after the pod's deletion: code %d, signal %d; want 0, 0 (the program exits on SIGTERM)", *e.ExitCode, *e.Signal)
	}
}

// The verbs name what they do not find, and heal has nothing to do on a healthy pod.
func TestFaultToolRejectsUnknownPodsAndContainers(t *testing.T) {
	cs, ns, n := faultCase(t)
	pod := faultPod(t, cs, ns, "target", false)
	if err := n.Kill(ns, "no-such-pod", "app"); !errors.Is(err, fault.ErrUnknownPod) {
		t.Errorf("kill of an unknown pod: %v", err)
	}
	if err := n.Freeze(ns, pod.Name, "no-such-container"); !errors.Is(err, fault.ErrUnknownContainer) {
		t.Errorf("freeze of an unknown container: %v", err)
	}
	out, err := faultScript(t, "kill", ns, "no-such-pod", "app")
	if err == nil || !strings.Contains(out, "does not run on this node") {
		t.Errorf("fault.sh kill of an unknown pod: %v %q", err, out)
	}
	out, err = faultScript(t, "partition", ns, pod.Name, "nowhere")
	if err == nil || !strings.Contains(out, "want api, an IPv4 address or ipv4:port") {
		t.Errorf("fault.sh partition with a bad target: %v %q", err, out)
	}
	for i := 0; i < 2; i++ {
		if out, err := faultScript(t, "heal", ns, pod.Name); err != nil {
			t.Errorf("fault.sh heal of a pod with no partition: %v %s", err, out)
		}
	}
	if out, err := faultScript(t, "pods"); err != nil || !strings.Contains(out, ns+"/"+pod.Name+" uid="+string(pod.UID)) {
		t.Errorf("fault.sh pods: %v %s", err, out)
	}
}

// freeze stops the container's process where it is (it answers nothing) until thaw; a frozen
// container can still be killed, and its restart runs thawed.
func TestFaultFreezeStopsTheContainerUntilThawed(t *testing.T) {
	cs, ns, n := faultCase(t)
	pod := faultPod(t, cs, ns, "sleeper", false)
	ip, pid := pod.Status.PodIP, mainPID(t, n, pod.UID, "app")
	if err := getWithin(ip, 5*time.Second); err != nil {
		t.Fatalf("the pod does not answer before the freeze: %v", err)
	}
	for i := 0; i < 2; i++ { // freezing a frozen container is harmless
		if err := n.Freeze(ns, pod.Name, "app"); err != nil {
			t.Fatal(err)
		}
	}
	if frozen, err := podByUID(t, n, string(pod.UID)).Frozen("app"); err != nil || !frozen {
		t.Fatalf("frozen = %v, %v", frozen, err)
	}
	if err := getWithin(ip, time.Second); err == nil {
		t.Fatal("a frozen process answered")
	}
	if err := n.Thaw(ns, pod.Name, "app"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the thawed process to answer", func() (bool, string) {
		err := getWithin(ip, time.Second)
		return err == nil, fmt.Sprint(err)
	})
	p, err := cs.CoreV1().Pods(ns).Get(ctx(t), pod.Name, metav1.GetOptions{})
	if err != nil || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("the freeze restarted the container: %v %s", err, describePods([]v1.Pod{*p}))
	}
	if e := findEvent(lifeEvents(t, n, string(pod.UID), "app"), nodestate.EventExit, pid); e != nil {
		t.Errorf("containers.jsonl has an exit of the frozen process: %+v", e)
	}

	if err := n.Freeze(ns, pod.Name, "app"); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(ns, pod.Name, "app"); err != nil {
		t.Fatalf("kill of a frozen container: %v", err)
	}
	waitFor(t, 30*time.Second, "the container killed while frozen to answer again", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.ContainerStatuses[0].RestartCount != 1 {
			return false, describePods([]v1.Pod{*p})
		}
		err = getWithin(ip, time.Second)
		return err == nil, fmt.Sprint(err)
	})
}

// podByUID is the node's pod with that UID.
func podByUID(t *testing.T, n *fault.Node, uid string) *fault.Pod {
	t.Helper()
	p, err := n.PodByUID(uid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
