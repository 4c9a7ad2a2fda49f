package scenariotest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
)

// config is what run.sh passes in the environment.
type config struct {
	kubeconfig     string
	repoRoot       string
	clusterDir     string
	reportDir      string
	kubectl        string
	counterNS      string
	kshardNS       string
	eventLog       string
	commit         string
	installSeconds string
}

func loadConfig() config {
	wd, _ := os.Getwd() // e2e/scenarios/test
	root := envOr("KSHARD_REPO_ROOT", wd+"/../../..")
	return config{
		kubeconfig:     os.Getenv("KUBECONFIG"),
		repoRoot:       root,
		clusterDir:     envOr("KSHARD_CLUSTER_DIR", root+"/.cluster"),
		reportDir:      envOr("KSHARD_REPORT_DIR", wd+"/../report"),
		kubectl:        envOr("KUBECTL", "kubectl"),
		counterNS:      envOr("COUNTER_NAMESPACE", "demo"),
		kshardNS:       envOr("KSHARD_NAMESPACE", "kshard-system"),
		eventLog:       envOr("KSHARD_COUNTER_EVENT_LOG", "/tmp/kshard-counter/events.log"),
		commit:         os.Getenv("KSHARD_COMMIT"),
		installSeconds: os.Getenv("KSHARD_INSTALL_SECONDS"),
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func bg() context.Context { return context.Background() }

// apiCtx bounds one API call, so that a call made while the API server is away fails instead
// of hanging.
func apiCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func newClients(kubeconfig string) (*kubernetes.Clientset, dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cs, dyn, nil
}

// podWatcher follows the counter's pods with an informer. It is the load drivers' view of which
// pods take requests: Ready, not terminating, with an IP, and not excluded by a scenario (a pod
// it is about to crash). While the API server is away it keeps the last state it saw.
type podWatcher struct {
	lister corelisters.PodLister
	sel    labels.Selector
	mu     sync.Mutex
	skip   map[string]bool
}

func watchPods(cs kubernetes.Interface, ns, selector string, stop <-chan struct{}) (*podWatcher, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods()
	w := &podWatcher{lister: inf.Lister(), sel: sel, skip: map[string]bool{}}
	informer := inf.Informer()
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		return nil, fmt.Errorf("the pod informer of %s did not sync", ns)
	}
	return w, nil
}

// All returns every pod the informer holds, sorted by name.
func (w *podWatcher) All() []*v1.Pod {
	pods, _ := w.lister.List(w.sel)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// Ready implements load.Pods.
func (w *podWatcher) Ready() []load.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []load.Pod
	for _, p := range w.All() {
		if isServing(p) && !w.skip[p.Name] {
			out = append(out, load.Pod{Name: p.Name, IP: p.Status.PodIP})
		}
	}
	return out
}

// Exclude stops sending requests through the pod (before a scenario crashes it).
func (w *podWatcher) Exclude(name string) {
	w.mu.Lock()
	w.skip[name] = true
	w.mu.Unlock()
}

// isServing: the pod can take requests: not terminating, with an IP, and every container (the
// injected native sidecar included) passes its readiness probe. The containers' readiness is used
// rather than the pod's Ready condition because the node lifecycle controller sets that condition
// False on every pod of a node whose heartbeats it missed (after an API server outage) until the
// node agent next posts the pod's status, while the processes serve all along.
func isServing(p *v1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, st := range p.Status.ContainerStatuses {
		if !st.Ready {
			return false
		}
	}
	for _, st := range p.Status.InitContainerStatuses {
		// Running init containers are native sidecars; finished ones are not ready by design.
		if st.State.Running != nil && !st.Ready {
			return false
		}
	}
	return true
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// mapWatcher records every version of one ShardMap into a History. Versions that cannot be
// decoded (for instance a status giving one shard to two pods) are kept as errors: the
// single-owner check reports them.
type mapWatcher struct {
	history *shardmap.History
	mu      sync.Mutex
	errors  []string
}

func watchShardMap(dyn dynamic.Interface, ns, name string, stop <-chan struct{}) (*mapWatcher, error) {
	w := &mapWatcher{history: shardmap.NewHistory()}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	informer := f.ForResource(shardmap.Resource).Informer()
	record := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		m, err := shardmap.FromUnstructured(u)
		if err != nil {
			w.mu.Lock()
			w.errors = append(w.errors, fmt.Sprintf("%s (resourceVersion %s): %v",
				time.Now().Format("15:04:05.000"), u.GetResourceVersion(), err))
			w.mu.Unlock()
			return
		}
		w.history.Add(time.Now(), m)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, err
	}
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		return nil, fmt.Errorf("the ShardMap informer of %s/%s did not sync", ns, name)
	}
	return w, nil
}

func (w *mapWatcher) Errors() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errors...)
}

// deploymentSettled says whether a Deployment runs exactly `replicas` up-to-date, ready pods and
// nothing else, per its status and the pods themselves.
func deploymentSettled(d *appsv1.Deployment, pods []*v1.Pod, replicas int32) (bool, string) {
	s := d.Status
	msg := fmt.Sprintf("deployment generation %d observed %d, replicas %d updated %d ready %d available %d; pods %s",
		d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, describePods(pods))
	if s.ObservedGeneration < d.Generation || s.Replicas != replicas || s.UpdatedReplicas != replicas ||
		s.ReadyReplicas != replicas || s.AvailableReplicas != replicas || int32(len(pods)) != replicas {
		return false, msg
	}
	for _, p := range pods {
		if !isServing(p) {
			return false, msg
		}
	}
	return true, msg
}

func describePods(pods []*v1.Pod) string {
	var parts []string
	for _, p := range pods {
		state := "not-ready"
		switch {
		case p.DeletionTimestamp != nil:
			state = "terminating"
		case podReady(p):
			state = "ready"
		}
		parts = append(parts, fmt.Sprintf("%s(%s,v%s)", p.Name, state, p.Labels["app.kubernetes.io/version"]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// runCommand runs a program with a deadline and returns its combined output.
func runCommand(timeout time.Duration, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s %s: no result within %s", name, strings.Join(args, " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
