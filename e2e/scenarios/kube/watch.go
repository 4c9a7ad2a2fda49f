package kube

import (
	"fmt"
	"sort"
	"sync"
	"time"

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

	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
)

// PodWatcher follows the counter's pods with an informer. It is the load drivers' view of which
// pods take requests: serving (IsServing), and not excluded by a scenario (a pod it is about to
// crash). While the API server is away it keeps the last state it saw.
type PodWatcher struct {
	lister corelisters.PodLister
	sel    labels.Selector
	mu     sync.Mutex
	skip   map[string]bool
}

// AppSelector selects the pods of an example app: every one labels its pods
// app.kubernetes.io/name=<its name> (e2e/counter-apps.sh).
func AppSelector(name string) string { return "app.kubernetes.io/name=" + name }

// WatchPods starts an informer on the pods of ns matching selector; it returns once synced.
func WatchPods(cs kubernetes.Interface, ns, selector string, stop <-chan struct{}) (*PodWatcher, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods()
	w := &PodWatcher{lister: inf.Lister(), sel: sel, skip: map[string]bool{}}
	informer := inf.Informer()
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		return nil, fmt.Errorf("the pod informer of %s did not sync", ns)
	}
	return w, nil
}

// All returns every pod the informer holds, sorted by name.
func (w *PodWatcher) All() []*v1.Pod {
	pods, _ := w.lister.List(w.sel)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// Ready implements load.Pods: the serving pods, sorted by name.
func (w *PodWatcher) Ready() []load.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []load.Pod
	for _, p := range w.All() {
		if IsServing(p) && !w.skip[p.Name] {
			out = append(out, load.Pod{Name: p.Name, IP: p.Status.PodIP})
		}
	}
	return out
}

// Exclude stops sending requests through the pod (before a scenario crashes it).
func (w *PodWatcher) Exclude(name string) {
	w.mu.Lock()
	w.skip[name] = true
	w.mu.Unlock()
}

// MapWatcher records every version of one ShardMap into a History. Versions that cannot be
// decoded (for instance a status giving one shard to two pods) are kept as errors: the
// single-owner checks report them.
type MapWatcher struct {
	history *shardmap.History
	mu      sync.Mutex
	errors  []string
}

// WatchShardMap starts an informer on the ShardMap ns/name; it returns once synced.
func WatchShardMap(dyn dynamic.Interface, ns, name string, stop <-chan struct{}) (*MapWatcher, error) {
	w := &MapWatcher{history: shardmap.NewHistory()}
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

// History is every version seen.
func (w *MapWatcher) History() *shardmap.History { return w.history }

// Errors are the versions that could not be decoded.
func (w *MapWatcher) Errors() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errors...)
}
