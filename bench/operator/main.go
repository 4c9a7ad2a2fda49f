// kshard-operator-scale: the operator at scale on the local cluster (e2e/cluster).
//
// It runs the real kshard-operator as a host process against the cluster and gives it PODS stub
// pods of one ShardMap of SHARDS shards:
//
//  1. a namespace, a Node that no agent runs (so the pods stay objects only), and PODS Pod
//     objects bound to it, labelled for the map, whose status (phase Running, a pod IP, Ready) the
//     benchmark writes itself;
//  2. one process serving the peer API's control calls (ping, assign, unassign) for every pod, each
//     on its own loopback address 127.1.x.y:7101, the pod IP written in its status;
//  3. every pod registers with the operator's manager API, CONCURRENCY at a time, as a sidecar
//     would, with its own projected token (audience kshard.io/operator, from a TokenRequest bound to the
//     pod); then the benchmark watches the ShardMap.
//
// Reported: how long the registrations took, the time from the last registration's answer until
// every shard is assigned and until the map is balanced (max − min shards per pod ≤ 1), the
// ShardMap's status size in bytes (as JSON, as the API server stores it), and the operator's peak
// RSS (VmHWM from /proc). Progress goes to stderr; the result, as a Markdown table, to stdout and
// as CSV to -csv when given.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kshard.local/e2e/support/httpcall"
	"kshard.local/e2e/support/kubeclient"
)

const (
	shardMapLabel = "kshard.io/shard-map"
	peerPort      = 7101
)

var shardMapGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmaps"}

type options struct {
	kubeconfig, operatorBin, namespace, name, node, logDir, csvPath, version string
	pods, shards, concurrency                                                int
	timeout                                                                  time.Duration
	rebalanceInterval, rebalanceRate, operatorFlags                          string
	keep                                                                     bool
}

type result struct {
	Pods, Shards              int
	ObjectsReady              time.Duration // pods created with their status written
	Registration              time.Duration // first register sent → last register answered
	AllAssigned               time.Duration // last register answered → unassignedCount 0
	Balanced                  time.Duration // last register answered → max − min ≤ 1
	AllHeld                   time.Duration // last register answered → the pods acknowledged every shard
	StatusBytes, ObjectBytes  int
	PeakRSSKiB, FinalRSSKiB   int64
	Epoch                     int64
	Assigns, Unassigns, Pings int64
	RegisterRetries           int64
	RegistrationWrites        int64 // status writes seen while the pods registered
	Writes                    int64 // status writes seen until the pods held every shard
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	flag.StringVar(&o.operatorBin, "operator", "build/bin/kshard-operator", "kshard-operator binary")
	flag.StringVar(&o.namespace, "namespace", "kshard-scale", "namespace to create (deleted first when present)")
	flag.StringVar(&o.name, "name", "scale", "ShardMap name")
	flag.StringVar(&o.node, "node", "kshard-scale-stub", "name of the Node the stub pods are bound to")
	flag.StringVar(&o.logDir, "log-dir", "", "where the operator's log goes (default: a temporary directory)")
	flag.StringVar(&o.csvPath, "csv", "", "append the result as a CSV row to this file")
	flag.StringVar(&o.version, "version", "v1", "version label of the pods")
	flag.IntVar(&o.pods, "pods", 1000, "stub pods")
	flag.IntVar(&o.shards, "shards", 10000, "shards of the ShardMap")
	flag.IntVar(&o.concurrency, "concurrency", 50, "registrations in flight")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "deadline of the whole run")
	flag.StringVar(&o.rebalanceInterval, "rebalance-interval", "", "spec.rebalanceInterval (default: the CRD's)")
	flag.StringVar(&o.rebalanceRate, "rebalance-rate", "", "spec.rebalanceRate (default: the CRD's)")
	flag.StringVar(&o.operatorFlags, "operator-flags", "", "more flags for kshard-operator, space-separated (e.g. \"--kube-qps=200\")")
	flag.BoolVar(&o.keep, "keep", false, "leave the namespace, the node and the operator's lease behind")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("operator-scale: ")
	if o.pods < 1 || o.pods > 64000 || o.shards < o.pods || o.concurrency < 1 {
		log.Fatalf("need 1 ≤ pods ≤ 64000, shards ≥ pods, concurrency ≥ 1 (got %d, %d, %d)", o.pods, o.shards, o.concurrency)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	r, err := run(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	report(o, r)
}

func run(ctx context.Context, o options) (result, error) {
	res := result{Pods: o.pods, Shards: o.shards}
	cfg, err := kubeclient.Config(o.kubeconfig, kubeclient.Limits{QPS: 1000, Burst: 2000})
	if err != nil {
		return res, fmt.Errorf("kubeconfig %q: %w", o.kubeconfig, err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	dc := dynamic.NewForConfigOrDie(cfg)

	if err := resetNamespace(ctx, kc, o.namespace); err != nil {
		return res, err
	}
	if err := ensureNode(ctx, kc, o.node); err != nil {
		return res, err
	}
	if !o.keep {
		defer cleanup(kc, o)
	}

	// The peer API of every stub pod, before any pod can register.
	stubs := newStubs(o.pods)
	if err := stubs.listen(); err != nil {
		return res, err
	}
	defer stubs.close()

	start := time.Now()
	uids, tokens, err := createPods(ctx, kc, o)
	if err != nil {
		return res, err
	}
	res.ObjectsReady = time.Since(start)
	log.Printf("%d pods created and Running in %v", o.pods, res.ObjectsReady.Round(time.Millisecond))

	if err := createShardMap(ctx, dc, o); err != nil {
		return res, err
	}

	op, err := startOperator(ctx, o)
	if err != nil {
		return res, err
	}
	defer op.stop()

	// Every status write is a MODIFIED event of the ShardMap.
	w, err := dc.Resource(shardMapGVR).Namespace(o.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + o.name})
	if err != nil {
		return res, fmt.Errorf("watch ShardMap %s/%s: %w", o.namespace, o.name, err)
	}
	var writes atomic.Int64
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == "MODIFIED" {
				writes.Add(1)
			}
		}
	}()
	defer w.Stop()

	logRSS := func(when string) {
		peak, cur := op.rss()
		log.Printf("operator RSS %s: %.1f MiB (peak so far %.1f MiB)", when, float64(cur)/1024, float64(peak)/1024)
	}
	logRSS("before the registrations")
	regStart := time.Now()
	retries, err := registerAll(ctx, o, op.manager, uids, tokens)
	if err != nil {
		return res, fmt.Errorf("%w (operator log: %s)", err, op.logPath)
	}
	lastRegistered := time.Now()
	res.Registration = lastRegistered.Sub(regStart)
	res.RegistrationWrites = writes.Load()
	logRSS("after the registrations")
	res.RegisterRetries = retries
	log.Printf("%d pods registered in %v (%d retries)", o.pods, res.Registration.Round(time.Millisecond), retries)

	var final *unstructured.Unstructured
	assigned := false
	for {
		sm, err := dc.Resource(shardMapGVR).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return res, fmt.Errorf("ShardMap %s/%s did not become balanced before the deadline: %w", o.namespace, o.name, err)
			}
			continue
		}
		st := readStatus(sm)
		now := time.Since(lastRegistered)
		if st.unassigned == 0 && st.podCount == int64(o.pods) && !assigned {
			assigned, res.AllAssigned = true, now
			log.Printf("every shard assigned %v after the last registration", now.Round(time.Millisecond))
		}
		if assigned && st.podCount == int64(o.pods) && st.max-st.min <= 1 {
			res.Balanced = now
			final = sm
			log.Printf("balanced %v after the last registration (%d–%d shards per pod)", now.Round(time.Millisecond), st.min, st.max)
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("ShardMap %s/%s not balanced before the deadline: %d pods listed, %d shards unassigned, %d–%d shards per pod (operator log: %s)",
				o.namespace, o.name, st.podCount, st.unassigned, st.min, st.max, op.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The status is written before the pods are told (write-ahead): wait until the pods hold
	// every shard, as acknowledged assigns.
	for {
		held, bad := stubs.holding()
		if len(bad) > 0 {
			return res, fmt.Errorf("the operator broke the single-owner rule: %s", strings.Join(bad, "; "))
		}
		if held == o.shards {
			res.AllHeld = time.Since(lastRegistered)
			log.Printf("the pods hold every shard %v after the last registration", res.AllHeld.Round(time.Millisecond))
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("the pods hold %d of %d shards at the deadline (operator log: %s)", held, o.shards, op.logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
	status, _ := json.Marshal(final.Object["status"])
	object, _ := json.Marshal(final.Object)
	res.StatusBytes, res.ObjectBytes = len(status), len(object)
	res.Epoch, _, _ = unstructured.NestedInt64(final.Object, "status", "epoch")
	logRSS("with every shard held")
	res.PeakRSSKiB, res.FinalRSSKiB = op.rss()
	res.Writes = writes.Load()
	res.Assigns, res.Unassigns, res.Pings = stubs.assigns.Load(), stubs.unassigns.Load(), stubs.pings.Load()
	return res, nil
}

// ---------------------------------------------------------------------------------------------
// Cluster objects

// deletePodsNow deletes the stub pods without a grace period: no kubelet runs them, so a graceful
// deletion would wait for the pod garbage collector.
func deletePodsNow(ctx context.Context, kc *kubernetes.Clientset, ns string) {
	zero := int64(0)
	_ = kc.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
}

func resetNamespace(ctx context.Context, kc *kubernetes.Clientset, ns string) error {
	deletePodsNow(ctx, kc, ns)
	err := kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	if err == nil {
		log.Printf("deleting the namespace %s left by an earlier run", ns)
	}
	for {
		_, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s was not deleted before the deadline", ns)
		case <-time.After(500 * time.Millisecond):
		}
	}
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// ensureNode creates a Node no agent runs: pods bound to it are API objects only (the pod
// garbage collector deletes pods bound to a node that does not exist).
func ensureNode(ctx context.Context, kc *kubernetes.Clientset, name string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kshard.io/bench": "operator-scale"}}}
	_, err := kc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

func cleanup(kc *kubernetes.Clientset, o options) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deletePodsNow(ctx, kc, o.namespace)
	_ = kc.CoreV1().Namespaces().Delete(ctx, o.namespace, metav1.DeleteOptions{})
	_ = kc.CoreV1().Nodes().Delete(ctx, o.node, metav1.DeleteOptions{})
}

func podName(i int) string { return fmt.Sprintf("stub-%05d", i) }

// podIP is the loopback address of stub pod i: 127.1.0.1 onwards (all of 127/8 is local).
func podIP(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }

// createPods creates the pods, writes their status and gets each its projected token for the
// operator (audience kshard.io/operator, bound to the pod, as the injector mounts it); it returns their uids
// and tokens.
func createPods(ctx context.Context, kc *kubernetes.Clientset, o options) ([]string, []string, error) {
	uids := make([]string, o.pods)
	tokens := make([]string, o.pods)
	// The namespace's default ServiceAccount comes from the controller-manager.
	for {
		if _, err := kc.CoreV1().ServiceAccounts(o.namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("the ServiceAccount %s/default was not created before the deadline", o.namespace)
		case <-time.After(200 * time.Millisecond):
		}
	}
	err := parallel(ctx, o.pods, 32, func(i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   podName(i),
				Labels: map[string]string{shardMapLabel: o.name, "kshard.io/version": o.version},
			},
			Spec: corev1.PodSpec{
				NodeName:   o.node,
				Containers: []corev1.Container{{Name: "app", Image: "kshard/scale-stub"}},
				// The node never answers: keep the pods bound however long the run takes.
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			},
		}
		created, err := kc.CoreV1().Pods(o.namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		now := metav1.Now()
		created.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      podIP(i),
			PodIPs:     []corev1.PodIP{{IP: podIP(i)}},
			HostIP:     "127.0.0.1",
			StartTime:  &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		}
		if _, err := kc.CoreV1().Pods(o.namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("write the status of pod %s: %w", pod.Name, err)
		}
		uids[i] = string(created.UID)
		tr, err := kc.CoreV1().ServiceAccounts(o.namespace).CreateToken(ctx, "default", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			Audiences:         []string{"kshard.io/operator"},
			ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token of pod %s: %w", pod.Name, err)
		}
		tokens[i] = tr.Status.Token
		return nil
	}, func(done int) { log.Printf("pods: %d/%d created", done, o.pods) })
	return uids, tokens, err
}

func createShardMap(ctx context.Context, dc dynamic.Interface, o options) error {
	spec := map[string]interface{}{"shards": int64(o.shards)}
	if o.rebalanceInterval != "" {
		spec["rebalanceInterval"] = o.rebalanceInterval
	}
	if o.rebalanceRate != "" {
		rate, err := strconv.ParseFloat(o.rebalanceRate, 64)
		if err != nil {
			return fmt.Errorf("-rebalance-rate %q: %w", o.rebalanceRate, err)
		}
		spec["rebalanceRate"] = rate
	}
	sm := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "kshard.io/v1alpha1",
		"kind":       "ShardMap",
		"metadata":   map[string]interface{}{"name": o.name, "namespace": o.namespace},
		"spec":       spec,
	}}
	if _, err := dc.Resource(shardMapGVR).Namespace(o.namespace).Create(ctx, sm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ShardMap %s/%s: %w", o.namespace, o.name, err)
	}
	return nil
}

type mapStatus struct {
	podCount, unassigned int64
	min, max             int64
}

func readStatus(sm *unstructured.Unstructured) mapStatus {
	var st mapStatus
	st.unassigned, _, _ = unstructured.NestedInt64(sm.Object, "status", "unassignedCount")
	pods, _, _ := unstructured.NestedSlice(sm.Object, "status", "pods")
	st.podCount = int64(len(pods))
	st.min = -1
	for _, p := range pods {
		n, _, _ := unstructured.NestedInt64(p.(map[string]interface{}), "shards")
		if st.min < 0 || n < st.min {
			st.min = n
		}
		if n > st.max {
			st.max = n
		}
	}
	if st.min < 0 {
		st.min = 0
	}
	return st
}

// ---------------------------------------------------------------------------------------------
// The operator

type operatorProc struct {
	cmd            *exec.Cmd
	manager, admin string
	logPath        string
	exited         chan struct{}
	peakKiB        atomic.Int64
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startOperator(ctx context.Context, o options) (*operatorProc, error) {
	mp, err := freePort()
	if err != nil {
		return nil, err
	}
	ap, err := freePort()
	if err != nil {
		return nil, err
	}
	logDir := o.logDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "kshard-operator-scale-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	op := &operatorProc{
		manager: fmt.Sprintf("127.0.0.1:%d", mp), admin: fmt.Sprintf("127.0.0.1:%d", ap),
		logPath: filepath.Join(logDir, "operator.log"), exited: make(chan struct{}),
	}
	logFile, err := os.Create(op.logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", o.kubeconfig,
		"--manager-listen", op.manager, "--advertise-address", op.manager,
		"--admin-listen", op.admin,
		"--lease-namespace", o.namespace, "--watch-namespace", o.namespace}
	op.cmd = exec.Command(o.operatorBin, append(args, strings.Fields(o.operatorFlags)...)...)
	// Its tokens for the sidecars come from the namespace's default ServiceAccount (one per map).
	op.cmd.Env = append(os.Environ(), "POD_NAME=kshard-operator-scale", "POD_NAMESPACE="+o.namespace,
		"POD_SERVICE_ACCOUNT=default")
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	if err := op.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.operatorBin, err)
	}
	log.Printf("operator started (pid %d, manager API %s, log %s)", op.cmd.Process.Pid, op.manager, op.logPath)
	go func() {
		_ = op.cmd.Wait()
		logFile.Close()
		close(op.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-op.exited:
			return nil, fmt.Errorf("the operator exited while starting; log: %s", op.logPath)
		default:
		}
		if code, _ := httpcall.Get(2*time.Second, "http://"+op.admin+"/readyz"); code == 200 {
			return op, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			op.stop()
			return nil, fmt.Errorf("the operator did not answer /readyz within 60 s; log: %s", op.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rss reads the operator's peak (VmHWM) and current (VmRSS) resident set in KiB.
func (op *operatorProc) rss() (peak, current int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.cmd.Process.Pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmHWM:":
			peak = v
		case "VmRSS:":
			current = v
		}
	}
	return peak, current
}

func (op *operatorProc) stop() {
	select {
	case <-op.exited:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
	}
}

// registerAll registers every pod as its sidecar would: POST .../register, retried while the
// operator answers 503 (not leading yet, or taking over).
func registerAll(ctx context.Context, o options, manager string, uids, tokens []string) (int64, error) {
	var retries atomic.Int64
	url := fmt.Sprintf("http://%s/v1/shardmaps/%s/%s/register", manager, o.namespace, o.name)
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	err := parallel(ctx, o.pods, o.concurrency, func(i int) error {
		body, _ := json.Marshal(map[string]string{
			"pod": podName(i), "uid": uids[i], "address": net.JoinHostPort(podIP(i), strconv.Itoa(peerPort)), "version": o.version,
		})
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokens[i])
			resp, err := client.Do(req)
			why := ""
			if err == nil {
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return nil
				}
				if resp.StatusCode != 503 {
					return fmt.Errorf("register %s: %d %s", podName(i), resp.StatusCode, answer)
				}
				why = fmt.Sprintf("%d %s", resp.StatusCode, answer)
			} else {
				why = err.Error()
			}
			if n := retries.Add(1); n <= 3 {
				log.Printf("register %s: retrying (%s)", podName(i), why)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("register %s: not accepted before the deadline (last error: %v)", podName(i), err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}, func(done int) { log.Printf("registrations: %d/%d answered", done, o.pods) })
	return retries.Load(), err
}

// ---------------------------------------------------------------------------------------------
// Helpers

// parallel runs fn(0..n-1) on `width` workers; it stops at the first error. progress is called
// every 10% of the work.
func parallel(ctx context.Context, n, width int, fn func(int) error, progress func(done int)) error {
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	step := int64(max(n/10, 1))
	for w := 0; w < width; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err; next.Store(int64(n)) })
					return
				}
				if d := done.Add(1); d%step == 0 {
					progress(int(d))
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

func report(o options, r result) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64) }
	fmt.Printf("| pods | shards | registration | status: all assigned | status: balanced | pods hold every shard | status bytes | operator peak RSS | status writes | assigns | unassigns |\n")
	fmt.Printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Printf("| %d | %d | %s ms | +%s ms | +%s ms | +%s ms | %d | %.1f MiB | %d (%d registering) | %d | %d |\n",
		r.Pods, r.Shards, ms(r.Registration), ms(r.AllAssigned), ms(r.Balanced), ms(r.AllHeld),
		r.StatusBytes, float64(r.PeakRSSKiB)/1024, r.Writes, r.RegistrationWrites, r.Assigns, r.Unassigns)
	fmt.Printf("(+: after the last registration was answered; flags: %q)\n", o.operatorFlags)
	if o.csvPath == "" {
		return
	}
	_, statErr := os.Stat(o.csvPath)
	f, err := os.OpenFile(o.csvPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatalf("csv %s: %v", o.csvPath, err)
	}
	defer f.Close()
	if os.IsNotExist(statErr) {
		fmt.Fprintln(f, "date,pods,shards,objects_ready_ms,registration_ms,all_assigned_ms,balanced_ms,all_held_ms,status_bytes,object_bytes,peak_rss_kib,final_rss_kib,epoch,assigns,unassigns,pings,register_retries,status_writes,registration_writes")
	}
	fmt.Fprintf(f, "%s,%d,%d,%s,%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", time.Now().UTC().Format(time.RFC3339),
		r.Pods, r.Shards, ms(r.ObjectsReady), ms(r.Registration), ms(r.AllAssigned), ms(r.Balanced), ms(r.AllHeld),
		r.StatusBytes, r.ObjectBytes, r.PeakRSSKiB, r.FinalRSSKiB, r.Epoch, r.Assigns, r.Unassigns, r.Pings, r.RegisterRetries, r.Writes, r.RegistrationWrites)
}
