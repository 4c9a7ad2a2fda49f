// Package clustertest holds the local cluster's acceptance tests. They take their cluster from
// KUBECONFIG; e2e/cluster/test.sh runs them against the local cluster and sets the variables below.
package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"kshard.local/e2e/support/envvar"
	"kshard.local/e2e/support/kubeclient"
	"kshard.local/e2e/support/podstate"
	"kshard.local/e2e/support/wait"
)

const appImage = "kshard/e2e-app:1.0.0"

// env returns a required environment variable (test.sh sets them all).
var env = envvar.ForTests("run the tests through e2e/cluster/test.sh")

func clients(t *testing.T) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	c := kubeclient.ForTest(t, env(t, "KUBECONFIG"), kubeclient.Limits{QPS: 50, Burst: 100})
	return c.Clientset, c.Config
}

// waitFor polls cond every 250 ms until it returns true, failing the test after timeout with what
// cond last said.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	wait.For(t, timeout, 250*time.Millisecond, "for "+what, cond)
}

// holdsFor checks cond every 250 ms for d (what must not happen takes watching), failing the test
// the first time it does not hold, with what cond said.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	wait.Holds(t, d, 250*time.Millisecond, what, cond)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// testNamespace creates a fresh namespace, waits for its default ServiceAccount, and deletes it
// (waiting until it is gone, which exercises graceful pod deletion) when the test ends.
func testNamespace(t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := "e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-")) + "-" + hex.EncodeToString(suffix)
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	name = strings.TrimLeft(name, "-")
	_, err := cs.CoreV1().Namespaces().Create(ctx(t), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := kubeclient.DeleteNamespace(context.Background(), cs, name, 180*time.Second); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, 30*time.Second, "the default ServiceAccount of "+name, func() (bool, string) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return name
}

// appContainer is the test program with downward-API env, probes and a preStop hook.
func appContainer(name, image string, port int32) v1.Container {
	fieldEnv := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	httpGet := func(path string) v1.ProbeHandler {
		return v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}}
	}
	return v1.Container{
		Name:  name,
		Image: image,
		Ports: []v1.ContainerPort{{Name: "http", ContainerPort: port}},
		Env: []v1.EnvVar{
			{Name: "PORT", Value: fmt.Sprint(port)},
			fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_UID", "metadata.uid"), fieldEnv("POD_IP", "status.podIP"),
			fieldEnv("APP_VERSION", "metadata.labels['app.kubernetes.io/version']"),
		},
		ReadinessProbe: &v1.Probe{ProbeHandler: httpGet("/readyz"), PeriodSeconds: 1},
		LivenessProbe:  &v1.Probe{ProbeHandler: httpGet("/healthz"), PeriodSeconds: 2, FailureThreshold: 3},
		Lifecycle:      &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/prestop", Port: intstr.FromString("http")}}},
		SecurityContext: &v1.SecurityContext{
			RunAsNonRoot: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
		},
	}
}

func appDeployment(name string, replicas int32, version string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	podLabels := map[string]string{"app": name, "app.kubernetes.io/version": version}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
			}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: v1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(10)),
					Containers:                    []v1.Container{appContainer("app", "kshard/e2e-app:"+version, 8080)},
				},
			},
		},
	}
}

// podsOf lists the pods with the labels, sorted by name, without terminating ones unless asked.
func podsOf(t *testing.T, cs *kubernetes.Clientset, ns, selector string, withTerminating bool) []v1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if withTerminating || p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func describePods(pods []v1.Pod) string {
	var parts []string
	for _, p := range pods {
		var cs []string
		for _, c := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			state := "?"
			switch {
			case c.State.Running != nil:
				state = "running"
			case c.State.Waiting != nil:
				state = "waiting:" + c.State.Waiting.Reason + " " + c.State.Waiting.Message
			case c.State.Terminated != nil:
				state = fmt.Sprintf("terminated:%d", c.State.Terminated.ExitCode)
			}
			cs = append(cs, fmt.Sprintf("%s=%s ready=%v restarts=%d", c.Name, state, c.Ready, c.RestartCount))
		}
		parts = append(parts, fmt.Sprintf("%s[%s ip=%s ready=%v deleting=%v %s]", p.Name, p.Status.Phase, p.Status.PodIP,
			podstate.Ready(&p), p.DeletionTimestamp != nil, strings.Join(cs, "; ")))
	}
	return strings.Join(parts, " ")
}

// waitReadyPods waits until exactly n non-terminating pods match and all are Ready, and no
// terminating ones are left if settled is true.
func waitReadyPods(t *testing.T, cs *kubernetes.Clientset, ns, selector string, n int, settled bool, timeout time.Duration) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	waitFor(t, timeout, fmt.Sprintf("%d Ready pods %q in %s", n, selector, ns), func() (bool, string) {
		all := podsOf(t, cs, ns, selector, true)
		pods = podsOf(t, cs, ns, selector, false)
		if len(pods) != n || (settled && len(all) != n) {
			return false, describePods(all)
		}
		for i := range pods {
			if !podstate.Ready(&pods[i]) || pods[i].Status.Phase != v1.PodRunning {
				return false, describePods(all)
			}
		}
		return true, ""
	})
	return pods
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// getJSON fetches a URL from the test process (the host) and decodes its JSON answer.
func getJSON(url string, out any) error {
	resp, err := httpClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// logFile is the node's copy of a container's log, kept after the pod is gone
// (cmd/kshard-node-recorder copies the kubelet's logs there within a fraction of a second).
func logFile(t *testing.T, ns, pod, container string) string {
	return filepath.Join(env(t, "KSHARD_CLUSTER_LOGS"), ns, pod, container+".log")
}

// logEvents returns the words of the test program's log lines ("START", "PRESTOP", "SIGTERM",
// ...) with their timestamps, once the log has every word of want (the copy trails the kubelet's
// log by a moment).
func logEvents(t *testing.T, ns, pod, container string, want ...string) ([]string, []int64) {
	t.Helper()
	var words []string
	var stamps []int64
	waitFor(t, 10*time.Second, fmt.Sprintf("%v in the log of %s/%s/%s", want, ns, pod, container), func() (bool, string) {
		raw, err := os.ReadFile(logFile(t, ns, pod, container))
		if err != nil {
			return false, err.Error()
		}
		words, stamps = nil, nil
		for _, line := range strings.Split(string(raw), "\n") {
			var ts int64
			var word string
			if n, _ := fmt.Sscanf(line, "%d %s", &ts, &word); n == 2 {
				words, stamps = append(words, word), append(stamps, ts)
			}
		}
		for _, w := range want {
			if indexOf(words, w) < 0 {
				return false, fmt.Sprintf("words %v", words)
			}
		}
		return true, ""
	})
	return words, stamps
}

func indexOf(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

// runScript runs one of the cluster's scripts (fault.sh, apiserver.sh).
func runScript(t *testing.T, script string, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(env(t, "KSHARD_CLUSTER_SCRIPTS"), script)}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", script, args, err, out)
	}
}
