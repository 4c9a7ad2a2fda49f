// Package runner runs the nemesis on the local cluster (e2e/cluster): the counter example,
// installed by its chart (e2e/install.sh), under continuous load while a seeded schedule
// (package schedule) injects faults; then it heals everything, lets the system settle, reads
// every counter and checks the whole history (package history). Its report says, per fault kind,
// how often it came, which requests failed and why, how long service took to recover, and what
// the checks found.
package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kshard.local/e2e/cluster/fault"
	"kshard.local/e2e/nemesis/history"
	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
)

// The counter examples (examples/*/k8s/*.yaml: every one names its containers and ports alike)
// and the chart.
const (
	versionLabel   = "app.kubernetes.io/version"
	appContainer   = "app"
	sidecarName    = "kshard-sidecar"
	shardCount     = 300
	publicPort     = 8081
	leaseName      = "kshard-operator"
	initialVersion = "1.0.0"
)

// Config of a run.
type Config struct {
	Seed     uint64
	Duration time.Duration
	// Rate of the load, requests per second over all counters; PerShard counters per shard.
	Rate     float64
	PerShard int
	// Quiet: the load's time on the healed, settled system before the final reads.
	Quiet time.Duration
	// Replay is the command line that replays this run (for the report).
	Replay string

	Kubeconfig string
	RepoRoot   string
	ClusterDir string
	ReportDir  string
	CounterNS  string
	// CounterName names the counter's Deployment and ShardMap; its pods are labelled
	// app.kubernetes.io/name=<CounterName>.
	CounterName string
	KshardNS    string
	EventLog    string
	Commit      string
}

// env is the cluster as the run reaches it.
type env struct {
	cfg    Config
	cs     *kubernetes.Clientset
	dyn    dynamic.Interface
	pods   *kube.PodWatcher
	maps   *kube.MapWatcher
	node   *fault.Node
	load   *load.Client // the load's requests: 30 s, longer than the ShardMap's sendTimeout
	probe  *load.Client // recovery probes and final reads: reads may be retried
	rec    *history.Recorder
	runID  string
	stopCh chan struct{}
}

func newEnv(cfg Config) (*env, error) {
	cs, dyn, err := kube.NewClients(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	node, err := fault.Open(cfg.ClusterDir)
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, cs: cs, dyn: dyn, node: node, rec: &history.Recorder{},
		load:   load.NewClient(publicPort, 30*time.Second),
		probe:  load.NewClient(publicPort, 5*time.Second),
		runID:  fmt.Sprintf("nm%d", time.Now().Unix()%1000000),
		stopCh: make(chan struct{})}
	if e.pods, err = kube.WatchPods(cs, cfg.CounterNS, kube.AppSelector(cfg.CounterName), e.stopCh); err != nil {
		return nil, err
	}
	if e.maps, err = kube.WatchShardMap(dyn, cfg.CounterNS, cfg.CounterName, e.stopCh); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) close() { close(e.stopCh) }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s nemesis: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// podIPs of the counter pods the informer knows, except the one named.
func (e *env) peerIPs(except string) []string {
	var ips []string
	for _, p := range e.pods.All() {
		if p.Name != except && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}

// operatorIPs are the addresses of the operator's pods.
func (e *env) operatorIPs() ([]string, error) {
	_, pods, err := kube.OperatorDeployment(e.cs, e.cfg.KshardNS)
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, p := range pods {
		if p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("no operator pod in %s has an IP", e.cfg.KshardNS)
	}
	return ips, nil
}

func targets(ips []string) ([]fault.Target, error) {
	var out []fault.Target
	for _, ip := range ips {
		t, err := fault.PodTarget(ip)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (e *env) lease() (*coordinationv1.Lease, error) {
	ctx, cancel := kube.Ctx()
	defer cancel()
	return e.cs.CoordinationV1().Leases(e.cfg.KshardNS).Get(ctx, leaseName, metav1.GetOptions{})
}

// deletePod deletes a pod of ns (grace nil: the pod's own), with its UID as precondition.
func (e *env) deletePod(ns, name, uid string, grace *int64) error {
	ctx, cancel := kube.Ctx()
	defer cancel()
	opts := metav1.DeleteOptions{GracePeriodSeconds: grace}
	if uid != "" {
		u := types.UID(uid)
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	return e.cs.CoreV1().Pods(ns).Delete(ctx, name, opts)
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	sort.Strings(out)
	return out
}

// script runs one of the local cluster's scripts (e2e/cluster/<name>).
func (e *env) script(timeout time.Duration, name string, args ...string) error {
	path := filepath.Join(e.cfg.RepoRoot, "e2e", "cluster", name)
	out, err := kube.RunCommand(timeout, e.cfg.RepoRoot, "bash", append([]string{path}, args...)...)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}
