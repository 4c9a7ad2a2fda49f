// kshard-operator-scale: the operator at scale on the local cluster (e2e/cluster).
//
// It runs the real kshard-operator as a host process against the cluster and gives it PODS stub
// pods of one ShardMap of SHARDS shards:
//
//  1. a namespace, a Node that no agent runs (so the pods stay objects only), and PODS Pod
//     objects bound to it, labelled for the map, whose status (phase Running, a pod IP, Ready) the
//     benchmark writes itself;
//  2. one process serving the peer API's control calls (ping, assign, unassign) for every pod, each
//     on its own loopback address 127.1.x.y:7101, the pod IP written in its status (twice as many
//     addresses with -rollout, for the new pods);
//  3. the map's consumers (-consumers, consumers.go): what sidecars receive of the ShardMap on the
//     wire, "full" (today's: a watch of the whole object; a sample of -full-sample pods, figures
//     extrapolated to every pod) and "delta" (the new: a metadata-only watch, and the changes
//     asked from the operator's manager API; one per pod, with the pod's token);
//  4. the registration phase: every pod registers with the operator's manager API, CONCURRENCY at
//     a time, as a sidecar would, with its own projected token (audience kshard.io/operator, from a
//     TokenRequest bound to the pod); the phase ends when the pods hold every shard and the
//     consumers have caught up;
//  5. with -rollout, the rollout phase (rollout.go): a rolling update of every pod as a Deployment
//     with maxSurge 25 % and maxUnavailable 0 does it: batches of new pods (version v2) created,
//     Running and registered, then as many old pods unregistered (as their sidecars do on
//     SIGTERM) and deleted; it ends when every shard is held by a new pod and the consumers have
//     caught up.
//
// Reported: how long the registrations took, the time from the last registration's answer until
// every shard is assigned and until the map is balanced (max − min shards per pod ≤ 1), the
// ShardMap's status size in bytes (as JSON, as the API server stores it), the operator's peak
// RSS (VmHWM from /proc); per phase, the status writes, the operator's and the API server's CPU
// seconds, and per consumer kind the bytes read by source, per consumer, per write, the most for
// one write, and the totals through the API server. Progress goes to stderr; the result, as
// Markdown tables, to stdout and as CSV to -csv when given.
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
	"os/signal"
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

	"kshard.local/e2e/support/kubeclient"
)

const (
	shardMapLabel = "kshard.io/shard-map"
	peerPort      = 7101
)

var shardMapGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmaps"}

type options struct {
	kubeconfig, operatorBin, namespace, name, node, logDir, csvPath, version string
	pods, shards, concurrency, fullSample                                    int
	timeout                                                                  time.Duration
	rebalanceInterval, rebalanceRate, operatorFlags, consumers               string
	keep, rollout                                                            bool
}

// phaseFigures are measured for each phase (registration, rollout).
type phaseFigures struct {
	Duration                  time.Duration // registration: first register → every shard held; rollout: all of it
	Writes                    int64         // status writes (MODIFIED events) in the phase
	OperatorCPU, APIServerCPU float64       // seconds (utime + stime); APIServerCPU < 0: not found
	Behind                    int           // consumers not up to date when the phase's figures were taken
}

type result struct {
	Pods, Shards              int
	ObjectsReady              time.Duration // pods created with their status written
	Registration              time.Duration // first register sent → last register answered
	AllAssigned               time.Duration // last register answered → unassignedCount 0
	Balanced                  time.Duration // last register answered → max − min ≤ 1
	AllHeld                   time.Duration // last register answered → the pods acknowledged every shard
	Stored                    storedSize
	PeakRSSKiB, FinalRSSKiB   int64 // when every shard is held after the registrations
	RunPeakRSSKiB             int64 // at the end of the run (after the rollout)
	Epoch                     int64
	Assigns, Unassigns, Pings int64
	RegisterRetries           int64
	RegistrationWrites        int64 // status writes seen while the pods registered
	Writes                    int64 // status writes seen until the pods held every shard
	Phases                    [nPhases]phaseFigures
	RolledOut                 bool
	Fleet                     *fleet // nil with -consumers none
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
	flag.StringVar(&o.version, "version", "v1", "version label of the pods (the rollout's new pods: v2)")
	flag.IntVar(&o.pods, "pods", 1000, "stub pods")
	flag.IntVar(&o.shards, "shards", 10000, "shards of the ShardMap")
	flag.IntVar(&o.concurrency, "concurrency", 50, "registrations (and unregistrations) in flight")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "deadline of the whole run")
	flag.StringVar(&o.rebalanceInterval, "rebalance-interval", "", "spec.rebalanceInterval (default: the CRD's)")
	flag.StringVar(&o.rebalanceRate, "rebalance-rate", "", "spec.rebalanceRate (default: the CRD's)")
	flag.StringVar(&o.operatorFlags, "operator-flags", "", "more flags for kshard-operator, space-separated (e.g. \"--kube-qps=200\")")
	flag.StringVar(&o.consumers, "consumers", "both", "the map's consumers: full, delta, both or none")
	flag.IntVar(&o.fullSample, "full-sample", 20, "pods with a full consumer (their figures are extrapolated to every pod)")
	flag.BoolVar(&o.rollout, "rollout", true, "after the registrations, a rolling update of every pod")
	flag.BoolVar(&o.keep, "keep", false, "leave the namespace, the node and the operator's lease behind")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("operator-scale: ")
	if o.pods < 1 || o.pods > 32000 || o.shards < o.pods || o.concurrency < 1 || o.fullSample < 0 {
		log.Fatalf("need 1 ≤ pods ≤ 32000, shards ≥ pods, concurrency ≥ 1, full-sample ≥ 0 (got %d, %d, %d, %d)",
			o.pods, o.shards, o.concurrency, o.fullSample)
	}
	switch o.consumers {
	case "full", "delta", "both", "none":
	default:
		log.Fatalf("-consumers %q: full, delta, both or none", o.consumers)
	}
	// Interrupted, it still stops its operator and deletes what it created.
	interrupted, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(interrupted, o.timeout)
	defer cancel()
	r, err := run(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	report(o, r)
}

// bench is what a run works with.
type bench struct {
	o      options
	kc     *kubernetes.Clientset
	dc     dynamic.Interface
	stubs  *stubs
	pods   *podSet
	op     *operatorProc
	fleet  *fleet // nil: no consumers
	mw     *mapWatch
	apiPID int // the kube-apiserver's process, 0 when not found

	replaced atomic.Int64 // old pods replaced by the rollout
}

// mapWatch counts the ShardMap's status writes (MODIFIED events) and keeps its newest version.
type mapWatch struct {
	writes atomic.Int64
	mu     sync.Mutex
	rv     string
}

func (m *mapWatch) latest() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rv
}

func (b *bench) logRSS(when string) {
	peak, cur := b.op.rss()
	log.Printf("operator RSS %s: %.1f MiB (peak so far %.1f MiB)", when, float64(cur)/1024, float64(peak)/1024)
}

// cpu reads the operator's and the API server's CPU seconds.
func (b *bench) cpu() (operator, apiServer float64) {
	apiServer = -1
	if b.apiPID != 0 {
		apiServer = cpuSeconds(b.apiPID)
	}
	return cpuSeconds(b.op.cmd.Process.Pid), apiServer
}

// endPhase waits for the consumers to catch up and takes the phase's figures from its start
// (writes, operator and API server CPU seconds then).
func (b *bench) endPhase(ctx context.Context, res *result, ph int, start time.Time, writes int64, opCPU, apiCPU float64) {
	if b.fleet != nil {
		if res.Phases[ph].Behind = b.fleet.settle(ctx, b.mw.latest, 30*time.Second); res.Phases[ph].Behind > 0 {
			log.Printf("%d consumers still behind version %s after 30 s", res.Phases[ph].Behind, b.mw.latest())
		}
	}
	op, api := b.cpu()
	f := &res.Phases[ph]
	f.Duration, f.Writes, f.OperatorCPU = time.Since(start), b.mw.writes.Load()-writes, op-opCPU
	f.APIServerCPU = -1
	if api >= 0 {
		f.APIServerCPU = api - apiCPU
	}
	log.Printf("%s phase: %v, %d status writes, operator CPU %.1f s", phaseNames[ph], f.Duration.Round(time.Millisecond), f.Writes, f.OperatorCPU)
}

func run(ctx context.Context, o options) (result, error) {
	res := result{Pods: o.pods, Shards: o.shards}
	cfg, err := kubeclient.Config(o.kubeconfig, kubeclient.Limits{QPS: 1000, Burst: 2000})
	if err != nil {
		return res, fmt.Errorf("kubeconfig %q: %w", o.kubeconfig, err)
	}
	b := &bench{o: o, kc: kubernetes.NewForConfigOrDie(cfg), dc: dynamic.NewForConfigOrDie(cfg), mw: &mapWatch{},
		apiPID: findProcess("kube-apiserver")}
	if b.apiPID == 0 {
		log.Printf("no kube-apiserver process on this machine: its CPU is not measured")
	}
	if err := resetNamespace(ctx, b.kc, o.namespace); err != nil {
		return res, err
	}
	if err := ensureNode(ctx, b.kc, o.node); err != nil {
		return res, err
	}
	if !o.keep {
		defer cleanup(b.kc, o)
	}

	// The peer API of every stub pod (and of the rollout's new pods), before any pod can register.
	all := o.pods
	if o.rollout {
		all = 2 * o.pods
	}
	b.stubs, b.pods = newStubs(all), newPodSet(all)
	if err := b.stubs.listen(); err != nil {
		return res, err
	}
	defer b.stubs.close()

	start := time.Now()
	if err := createPods(ctx, b.kc, o, seq(0, o.pods), o.version, b.pods); err != nil {
		return res, err
	}
	res.ObjectsReady = time.Since(start)
	log.Printf("%d pods created and Running in %v", o.pods, res.ObjectsReady.Round(time.Millisecond))

	if err := createShardMap(ctx, b.dc, o); err != nil {
		return res, err
	}
	if b.op, err = startOperator(ctx, o); err != nil {
		return res, err
	}
	defer b.op.stop()
	if err := b.watchWrites(ctx); err != nil {
		return res, err
	}
	if o.consumers != "none" {
		b.fleet = newFleet(o, cfg, b.op.manager, b.pods)
		res.Fleet = b.fleet
		defer b.fleet.stopAll()
		for i := 0; i < o.pods; i++ {
			b.fleet.start(i, i)
		}
		log.Printf("consumers started: %s (full: %d pods, delta: %d)", o.consumers, b.fleetCount(true), b.fleetCount(false))
	}
	done := make(chan struct{})
	defer close(done)
	go b.progress(done)
	if err := b.registration(ctx, &res); err != nil {
		return res, err
	}
	if o.rollout {
		if err := b.rollout(ctx, &res); err != nil {
			return res, err
		}
	}
	res.RunPeakRSSKiB, _ = b.op.rss()
	res.Assigns, res.Unassigns, res.Pings = b.stubs.assigns.Load(), b.stubs.unassigns.Load(), b.stubs.pings.Load()
	return res, nil
}

func (b *bench) fleetCount(full bool) int {
	if b.fleet == nil {
		return 0
	}
	if full {
		if !b.fleet.full {
			return 0
		}
		return b.fleet.fullSlots()
	}
	if !b.fleet.delta {
		return 0
	}
	return b.o.pods
}

// watchWrites counts every status write: a MODIFIED event of the ShardMap.
func (b *bench) watchWrites(ctx context.Context) error {
	w, err := b.dc.Resource(shardMapGVR).Namespace(b.o.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + b.o.name})
	if err != nil {
		return fmt.Errorf("watch ShardMap %s/%s: %w", b.o.namespace, b.o.name, err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == "MODIFIED" {
				b.mw.writes.Add(1)
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == "ADDED" || ev.Type == "MODIFIED") {
				b.mw.mu.Lock()
				b.mw.rv = u.GetResourceVersion()
				b.mw.mu.Unlock()
			}
		}
	}()
	go func() { <-ctx.Done(); w.Stop() }()
	return nil
}

// registration: every pod registers; then until the map is balanced and the pods hold every
// shard.
func (b *bench) registration(ctx context.Context, res *result) error {
	o := b.o
	b.logRSS("before the registrations")
	regStart := time.Now()
	opCPU, apiCPU := b.cpu()
	retries, err := registerAll(ctx, o, b.op.manager, seq(0, o.pods), o.version, b.pods)
	if err != nil {
		return fmt.Errorf("%w (operator log: %s)", err, b.op.logPath)
	}
	lastRegistered := time.Now()
	res.Registration = lastRegistered.Sub(regStart)
	res.RegistrationWrites = b.mw.writes.Load()
	b.logRSS("after the registrations")
	res.RegisterRetries = retries
	log.Printf("%d pods registered in %v (%d retries)", o.pods, res.Registration.Round(time.Millisecond), retries)

	var final *unstructured.Unstructured
	var wholeRead time.Time
	assigned := false
	for {
		sm, err := b.dc.Resource(shardMapGVR).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("ShardMap %s/%s did not become balanced before the deadline: %w", o.namespace, o.name, err)
			}
			continue
		}
		st := readStatus(sm)
		now := time.Since(lastRegistered)
		// A segmented status keeps its pods in the segments: counted from status.podCount, and
		// read (every 2 s at most, a few MB each) once the map could be balanced.
		if st.podCount == 0 && st.listed == int64(o.pods) {
			st.podCount = st.listed
			if st.unassigned == 0 && time.Since(wholeRead) > 2*time.Second {
				wholeRead = time.Now()
				if whole, _, err := wholeMap(ctx, b.dc, sm); err == nil {
					st = readStatus(whole)
				} else {
					log.Printf("cannot read the map's segments (a newer version replaced them?): %v", err)
				}
			}
		}
		if st.unassigned == 0 && st.podCount == int64(o.pods) && !assigned {
			assigned, res.AllAssigned = true, now
			log.Printf("every shard assigned %v after the last registration", now.Round(time.Millisecond))
		}
		// The pods acknowledged every shard (the assigns follow the status: write-ahead).
		if assigned && res.AllHeld == 0 && b.stubs.heldCount() == o.shards {
			res.AllHeld = now
			log.Printf("the pods hold every shard %v after the last registration", now.Round(time.Millisecond))
		}
		if assigned && st.counted && st.podCount == int64(o.pods) && st.max-st.min <= 1 {
			res.Balanced = now
			final = sm
			log.Printf("balanced %v after the last registration (%d–%d shards per pod)", now.Round(time.Millisecond), st.min, st.max)
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ShardMap %s/%s not balanced before the deadline: %d pods listed, %d shards unassigned, %d–%d shards per pod (operator log: %s)",
				o.namespace, o.name, st.podCount, st.unassigned, st.min, st.max, b.op.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Balanced: wait until the pods hold every shard again, as acknowledged assigns.
	if err := b.waitHeld(ctx, 0); err != nil {
		return err
	}
	if res.AllHeld == 0 {
		res.AllHeld = time.Since(lastRegistered)
		log.Printf("the pods hold every shard %v after the last registration", res.AllHeld.Round(time.Millisecond))
	}
	if _, size, err := wholeMap(ctx, b.dc, final); err == nil {
		res.Stored = size
	} else {
		log.Printf("cannot read the stored map's size: %v", err)
	}
	res.Epoch, _, _ = unstructured.NestedInt64(final.Object, "status", "epoch")
	b.logRSS("with every shard held")
	res.PeakRSSKiB, res.FinalRSSKiB = b.op.rss()
	res.Writes = b.mw.writes.Load()
	b.endPhase(ctx, res, phaseRegistration, regStart, 0, opCPU, apiCPU)
	return nil
}

// waitHeld waits until the pods numbered `first` onwards hold every shard, checking the
// single-owner rule meanwhile.
func (b *bench) waitHeld(ctx context.Context, first int) error {
	for {
		_, bad := b.stubs.holding()
		if len(bad) > 0 {
			return fmt.Errorf("the operator broke the single-owner rule: %s", strings.Join(bad, "; "))
		}
		held := b.stubs.holdingFrom(first)
		if held == b.o.shards {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pods from %s on hold %d of %d shards at the deadline (operator log: %s)", podName(first), held, b.o.shards, b.op.logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
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

// podSet: the uid and projected token of every stub pod, by number (the rollout's new pods
// follow the first -pods).
type podSet struct{ uids, tokens []string }

func newPodSet(n int) *podSet { return &podSet{uids: make([]string, n), tokens: make([]string, n)} }

// seq is lo, lo+1, ..., hi-1.
func seq(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// createPods creates the pods numbered idx with the version label `version`, writes their status
// and gets each its projected token for the operator (audience kshard.io/operator, bound to the
// pod, as the injector mounts it) into ps.
func createPods(ctx context.Context, kc *kubernetes.Clientset, o options, idx []int, version string, ps *podSet) error {
	// The namespace's default ServiceAccount comes from the controller-manager.
	for {
		if _, err := kc.CoreV1().ServiceAccounts(o.namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the ServiceAccount %s/default was not created before the deadline", o.namespace)
		case <-time.After(200 * time.Millisecond):
		}
	}
	err := parallel(ctx, len(idx), 32, func(n int) error {
		i := idx[n]
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   podName(i),
				Labels: map[string]string{shardMapLabel: o.name, "kshard.io/version": version, "app.kubernetes.io/version": version},
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
		ps.uids[i] = string(created.UID)
		tr, err := kc.CoreV1().ServiceAccounts(o.namespace).CreateToken(ctx, "default", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			Audiences:         []string{"kshard.io/operator"},
			ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token of pod %s: %w", pod.Name, err)
		}
		ps.tokens[i] = tr.Status.Token
		return nil
	}, func(done int) { log.Printf("pods: %d/%d created", done, len(idx)) })
	return err
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
	listed               int64 // status.podCount, which a segmented status keeps
	min, max             int64
	counted              bool // min and max are known: the pods were read
}

func readStatus(sm *unstructured.Unstructured) mapStatus {
	var st mapStatus
	st.unassigned, _, _ = unstructured.NestedInt64(sm.Object, "status", "unassignedCount")
	st.listed, _, _ = unstructured.NestedInt64(sm.Object, "status", "podCount")
	pods, _, _ := unstructured.NestedSlice(sm.Object, "status", "pods")
	st.podCount = int64(len(pods))
	st.counted = len(pods) > 0
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

// registerAll registers the pods numbered idx as their sidecars would: POST .../register,
// retried while the operator answers 503 (not leading yet, or taking over).
func registerAll(ctx context.Context, o options, manager string, idx []int, version string, ps *podSet) (int64, error) {
	return postAll(ctx, o, manager, "register", idx, ps, func(i int) any {
		return map[string]string{
			"pod": podName(i), "uid": ps.uids[i], "address": net.JoinHostPort(podIP(i), strconv.Itoa(peerPort)), "version": version,
		}
	}, func(code int, _ []byte) (time.Duration, bool) { return 200 * time.Millisecond, code == 503 })
}

// postAll sends POST .../<verb> of the manager API for the pods numbered idx, o.concurrency at a
// time, each with its pod's token, as their sidecars do. An answer other than 200 is an error
// unless retry accepts it (with the pause before the next attempt); a transport error is retried
// after 200 ms. It returns the number of retries.
func postAll(ctx context.Context, o options, manager, verb string, idx []int, ps *podSet, body func(i int) any,
	retry func(code int, answer []byte) (time.Duration, bool)) (int64, error) {
	var retries atomic.Int64
	url := fmt.Sprintf("http://%s/v1/shardmaps/%s/%s/%s", manager, o.namespace, o.name, verb)
	client := &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	defer client.CloseIdleConnections()
	err := parallel(ctx, len(idx), o.concurrency, func(n int) error {
		i := idx[n]
		payload, _ := json.Marshal(body(i))
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+ps.tokens[i])
			resp, err := client.Do(req)
			why, pause := "", 200*time.Millisecond
			if err == nil {
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return nil
				}
				again := false
				if pause, again = retry(resp.StatusCode, answer); !again {
					return fmt.Errorf("%s %s: %d %s", verb, podName(i), resp.StatusCode, answer)
				}
				why = fmt.Sprintf("%d %s", resp.StatusCode, answer)
			} else {
				why = err.Error()
			}
			if n := retries.Add(1); n <= 3 {
				log.Printf("%s %s: retrying (%.300s)", verb, podName(i), why)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s: not accepted before the deadline (last: %.300s)", verb, podName(i), why)
			case <-time.After(pause):
			}
		}
	}, func(done int) { log.Printf("%s: %d/%d answered", verb, done, len(idx)) })
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
