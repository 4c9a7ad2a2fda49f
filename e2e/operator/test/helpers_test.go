// Package operatortest holds kshard-operator's tests against the local cluster (e2e/cluster).
// e2e/operator/run.sh builds what they need and runs them; the variables below come from it.
package operatortest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kshard.local/e2e/support/envvar"
	"kshard.local/e2e/support/httpcall"
	"kshard.local/e2e/support/kubeclient"
	"kshard.local/e2e/support/shards"
	"kshard.local/e2e/support/wait"
)

var shardMapGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmaps"}
var segmentGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmapsegments"}

// The host's address on the cluster bridge: pods reach the operators (host processes) there.
const nodeIP = "10.244.0.1"

// env returns a variable that run.sh sets, and fails the test when it is not set.
var env = envvar.ForTests("run the tests through e2e/operator/run.sh")

// clusterClients are the cluster's clients: Clientset, and Dynamic for the ShardMaps.
type clusterClients = kubeclient.Clients

func clients(t *testing.T) clusterClients {
	t.Helper()
	return kubeclient.ForTest(t, env(t, "KUBECONFIG"), kubeclient.Limits{QPS: 50, Burst: 100})
}

// waitFor polls cond every 200 ms until it holds and returns how long that took, failing after
// timeout with what cond last said.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return wait.For(t, timeout, 200*time.Millisecond, "until "+what, cond)
}

func bg() context.Context { return context.Background() }

// testNamespace creates a namespace for the test and deletes it when the test ends.
func testNamespace(t *testing.T, c clusterClients, prefix string) string {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := prefix + "-" + hex.EncodeToString(suffix)
	if _, err := c.Clientset.CoreV1().Namespaces().Create(bg(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := kubeclient.DeleteNamespace(bg(), c.Clientset, name, 180*time.Second); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, 30*time.Second, "the default ServiceAccount of "+name+" exists", func() (bool, string) {
		_, err := c.Clientset.CoreV1().ServiceAccounts(name).Get(bg(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return name
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// freePort returns a TCP port on `host` that was free a moment ago, below the kernel's range for
// outgoing connections' local ports: a port that bind(0) hands out is one the kernel may give the
// next outgoing connection before the operator binds it ("address already in use"). Never the
// same port twice in one test binary.
func freePort(t *testing.T, host string) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	const low = 15000
	high := ephemeralLow() - 1
	for try := 0; high-low >= 1000 && try < high-low+1; try++ {
		port := low + mrand.IntN(high-low+1)
		if portsGiven[port] {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			l.Close()
			portsGiven[port] = true
			return port
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("free port on %s: %v", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ephemeralLow is the lower end of the kernel's local port range for outgoing connections.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			return n
		}
	}
	return 32768
}

// operator is one kshard-operator replica running as a host process.
type operator struct {
	name      string
	manager   string   // host:port of its manager API, reachable from pods
	admin     string   // host:port of /metrics, /healthz, /readyz
	extra     []string // more flags, kept across restart
	cmd       *exec.Cmd
	logPath   string
	exited    chan struct{}
	exitState error
}

// extra: more flags for kshard-operator (kept across restart).
func startOperator(t *testing.T, name, leaseNamespace, watchNamespace string, extra ...string) *operator {
	t.Helper()
	return startOperatorAt(t, name, leaseNamespace, watchNamespace,
		net.JoinHostPort(nodeIP, strconv.Itoa(freePort(t, nodeIP))),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1"))), extra...)
}

// restart starts the replica again on the same addresses (the pods know its manager address).
func (op *operator) restart(t *testing.T, leaseNamespace, watchNamespace string) *operator {
	t.Helper()
	return startOperatorAt(t, op.name, leaseNamespace, watchNamespace, op.manager, op.admin, op.extra...)
}

func startOperatorAt(t *testing.T, name, leaseNamespace, watchNamespace, manager, admin string, extra ...string) *operator {
	t.Helper()
	op := &operator{name: name, manager: manager, admin: admin, extra: extra, exited: make(chan struct{})}
	logDir := env(t, "KSHARD_OPERATOR_LOGS")
	_ = os.MkdirAll(logDir, 0o755)
	op.logPath = filepath.Join(logDir, watchNamespace+"-"+name+".log")
	logFile, err := os.OpenFile(op.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig", env(t, "KUBECONFIG"),
		"--manager-listen", op.manager, "--advertise-address", op.manager,
		"--admin-listen", op.admin,
		"--lease-namespace", leaseNamespace, "--watch-namespace", watchNamespace,
		"--log-level", "debug"}
	op.cmd = exec.Command(env(t, "KSHARD_OPERATOR_BIN"), append(args, extra...)...)
	// The operator mints its tokens for the sidecars from the namespace's default ServiceAccount
	// (the stub pods do not check them; the chart's e2e/security suite does).
	op.cmd.Env = append(os.Environ(), "POD_NAME="+name, "POD_NAMESPACE="+leaseNamespace,
		"POD_SERVICE_ACCOUNT=default")
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	if err := op.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		op.exitState = op.cmd.Wait()
		logFile.Close()
		close(op.exited)
	}()
	t.Cleanup(func() { op.stop(t, syscall.SIGTERM) })
	waitFor(t, 90*time.Second, name+" answers /readyz", func() (bool, string) {
		select {
		case <-op.exited:
			t.Fatalf("%s exited: %v; log:\n%s", name, op.exitState, tail(op.logPath, 40))
		default:
		}
		code, body := httpGet("http://" + op.admin + "/readyz")
		return code == 200, fmt.Sprintf("%d %s", code, body)
	})
	return op
}

// stop sends `sig` and waits for the process to exit.
func (op *operator) stop(t *testing.T, sig syscall.Signal) {
	select {
	case <-op.exited:
		return
	default:
	}
	_ = op.cmd.Process.Signal(sig)
	select {
	case <-op.exited:
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
		t.Errorf("%s did not exit within 30 s of %v", op.name, sig)
	}
}

func (op *operator) metric(name, labels string) float64 {
	_, body := httpGet("http://" + op.admin + "/metrics")
	return metricValue(body, name, labels)
}

// metricValue finds `name{...labels...} value` in a Prometheus exposition; every k="v" of
// `labels` (comma-separated) must appear. 0 when absent.
func metricValue(exposition, name, labels string) float64 {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range strings.Split(labels, ",") {
			if l != "" && !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		return v
	}
	return 0
}

// httpGet and httpPost(As) return the answer's status and body, or 0 and the error's text.
func httpGet(url string) (int, string) {
	return httpcall.Get(5*time.Second, url)
}

func httpPost(url, body string) (int, string) {
	return httpPostAs(url, body, "")
}

// httpPostAs posts with `token` as the bearer token (none when empty).
func httpPostAs(url, body, token string) (int, string) {
	return httpcall.Post(40*time.Second, url, body, token)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env(t, "KUBECONFIG"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// shardMapStatus is the part of a ShardMap's status the tests read.
type shardMapStatus struct {
	Epoch   int64 `json:"epoch"`
	Manager struct {
		Pod     string `json:"pod"`
		Address string `json:"address"`
	} `json:"manager"`
	Pods []struct {
		Name    string `json:"name"`
		UID     string `json:"uid"`
		Address string `json:"address"`
		Shards  int    `json:"shards"`
	} `json:"pods"`
	Assignments []struct {
		Pod    string `json:"pod"`
		Epoch  int64  `json:"epoch"`
		Shards string `json:"shards"`
	} `json:"assignments"`
	UnassignedCount int `json:"unassignedCount"`
	PodCount        int `json:"podCount"`
	Segments        []struct {
		Name   string `json:"name"`
		Sha256 string `json:"sha256"`
	} `json:"segments"`
	Conditions []struct {
		Type               string `json:"type"`
		Status             string `json:"status"`
		Reason             string `json:"reason"`
		ObservedGeneration int64  `json:"observedGeneration"`
	} `json:"conditions"`
}

// getStatus reads the map's status, whole: the pods and assignments of a large map are in the
// ShardMapSegments its status names (decision 0018), each checked against its SHA-256.
func getStatus(t *testing.T, c clusterClients, ns, name string) (shardMapStatus, error) {
	var st shardMapStatus
	obj, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Get(bg(), name, metav1.GetOptions{})
	if err != nil {
		return st, err
	}
	raw, _ := json.Marshal(obj.Object["status"])
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, err
	}
	if len(st.Segments) > 0 {
		st.Pods, st.Assignments = nil, nil // the stub's: none, and one every reader refuses
	}
	for _, ref := range st.Segments {
		seg, err := c.Dynamic.Resource(segmentGVR).Namespace(ns).Get(bg(), ref.Name, metav1.GetOptions{})
		if err != nil {
			return st, fmt.Errorf("ShardMapSegment %s: %w", ref.Name, err)
		}
		data, _, _ := unstructured.NestedString(seg.Object, "data")
		if sum := sha256.Sum256([]byte(data)); hex.EncodeToString(sum[:]) != ref.Sha256 {
			t.Fatalf("ShardMapSegment %s does not match the SHA-256 its status names", ref.Name)
		}
		var part shardMapStatus
		if err := json.Unmarshal([]byte(data), &part); err != nil {
			t.Fatalf("ShardMapSegment %s: %v", ref.Name, err)
		}
		st.Pods, st.Assignments = append(st.Pods, part.Pods...), append(st.Assignments, part.Assignments...)
	}
	return st, nil
}

func (s shardMapStatus) condition(kind string) string {
	for _, c := range s.Conditions {
		if c.Type == kind {
			return c.Status
		}
	}
	return ""
}

// owners maps every assigned shard to its pod; an error when a shard appears twice.
func (s shardMapStatus) owners() (map[int]string, error) {
	out := map[int]string{}
	for _, a := range s.Assignments {
		ids, err := shards.Parse(a.Shards)
		if err != nil {
			return nil, err
		}
		for _, sh := range ids {
			if prev, dup := out[sh]; dup {
				return nil, fmt.Errorf("shard %d is assigned to %s and %s", sh, prev, a.Pod)
			}
			out[sh] = a.Pod
		}
	}
	return out, nil
}

func newShardMap(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kshard.io/v1alpha1", "kind": "ShardMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
