// Package agent is the node agent of kshard's local test cluster: the kubelet of one Node, running
// each container as a process in a per-pod network namespace, with a private mount namespace per
// container for its volumes. See e2e/cluster/README.md.
package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"kshard.local/e2e/cluster/nodestate"
)

// Config is the agent's configuration (flags of kshard-node-agent).
type Config struct {
	NodeName     string
	NodeIP       string // the bridge address: the node's InternalIP
	APIHost      string // what pods get as KUBERNETES_SERVICE_HOST
	APIPort      int
	StateDir     string // .cluster/agent
	LogDir       string // .cluster/logs
	KubeletPort  int
	KubeletCert  string
	KubeletKey   string
	ClientCA     string // CA of the API server's client certificate (kubelet API authentication)
	BindPods     bool   // act as the scheduler: bind unscheduled pods to this node
	VolumeResync time.Duration
}

// Agent is the node agent.
type Agent struct {
	Cfg       Config
	Client    kubernetes.Interface // the node's identity (system:node:<name>)
	Binder    kubernetes.Interface // the scheduler's identity, for pod bindings
	Images    *ImageResolver
	Net       *Network
	Cgroups   *Cgroups
	Lifecycle *nodestate.LifecycleLog // containers.jsonl
	SelfExe   string
	Recorder  record.EventRecorder

	statusMu sync.Mutex
	mu       sync.Mutex
	workers  map[types.UID]*podWorker
	mountMu  sync.Mutex
}

func (a *Agent) logPath(ns, pod, container string) string {
	return filepath.Join(a.Cfg.LogDir, ns, pod, container+".log")
}

func (a *Agent) forget(uid types.UID) {
	a.mu.Lock()
	delete(a.workers, uid)
	a.mu.Unlock()
}

// createdPathsFile lists the mount points the agent created on the host, for cluster-down.
func (a *Agent) createdPathsFile() string { return filepath.Join(a.Cfg.StateDir, "created-paths") }

// ensureMountpoint creates a missing mount point (and missing parents), recording each created
// path before creating it.
func (a *Agent) ensureMountpoint(path string, dir bool) error {
	a.mountMu.Lock()
	defer a.mountMu.Unlock()
	path = filepath.Clean(path)
	if !filepath.IsAbs(path) {
		return fmt.Errorf("mountPath %q is not absolute", path)
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() != dir {
			return fmt.Errorf("mountPath %s exists on the node and is not a %s", path, map[bool]string{true: "directory", false: "file"}[dir])
		}
		return nil
	}
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		missing = append([]string{p}, missing...)
	}
	f, err := os.OpenFile(a.createdPathsFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for i, p := range missing {
		if _, err := fmt.Fprintln(f, p); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if i == len(missing)-1 && !dir {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
		} else if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// CleanupLeftovers removes what a previous run of the agent left: container processes (their
// cgroups), network namespaces, pod directories. Pods still in the API are started afresh.
func (a *Agent) CleanupLeftovers() error {
	err := RemoveTree(a.Cgroups.Root)
	a.Net.DeleteAllSandboxes()
	return errors.Join(err, os.RemoveAll(filepath.Join(a.Cfg.StateDir, "pods")),
		os.RemoveAll(nodestate.OrphansDir(a.Cfg.StateDir)))
}

// Run runs the agent until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	a.workers = map[types.UID]*podWorker{}
	if err := os.MkdirAll(a.Cgroups.Root, 0o755); err != nil {
		return fmt.Errorf("cgroup root: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.Client.CoreV1().Events("")})
	a.Recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: a.Cfg.NodeName})

	if err := a.registerNode(ctx); err != nil {
		return err
	}
	go a.heartbeat(ctx)
	go a.watchOrphans(ctx)
	if a.Cfg.KubeletPort > 0 {
		go a.serveKubeletAPI(ctx)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(a.Client, 30*time.Second,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.Cfg.NodeName).String()
		}))
	podInformer := factory.Core().V1().Pods().Informer()
	_, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.podChanged(obj.(*v1.Pod)) },
		UpdateFunc: func(_, obj any) { a.podChanged(obj.(*v1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				a.podDeleted(pod)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if a.Cfg.BindPods {
		go a.runBinder(ctx)
	}
	<-ctx.Done()
	return nil
}

func (a *Agent) podChanged(pod *v1.Pod) {
	a.mu.Lock()
	w, ok := a.workers[pod.UID]
	if !ok {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			// Finished before this agent started: only the final delete is left to do.
			if pod.DeletionTimestamp == nil {
				a.mu.Unlock()
				return
			}
		}
		w = newPodWorker(a, pod)
		a.workers[pod.UID] = w
		a.mu.Unlock()
		klog.InfoS("starting pod", "pod", klog.KObj(pod), "uid", pod.UID)
		go w.run()
		return
	}
	a.mu.Unlock()
	w.setPod(pod)
}

func (a *Agent) podDeleted(pod *v1.Pod) {
	a.mu.Lock()
	w, ok := a.workers[pod.UID]
	a.mu.Unlock()
	if ok {
		w.setPod(nil)
	}
}

// runBinder binds every unscheduled pod (of the default scheduler) to this node: the cluster runs
// no kube-scheduler.
func (a *Agent) runBinder(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(a.Binder, 30*time.Second,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	inf := factory.Core().V1().Pods().Informer()
	queue := make(chan *v1.Pod, 1024)
	enqueue := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok {
			select {
			case queue <- pod:
			default:
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	factory.Start(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return
		case pod := <-queue:
			if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil ||
				(pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != v1.DefaultSchedulerName) {
				continue
			}
			binding := &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     v1.ObjectReference{Kind: "Node", Name: a.Cfg.NodeName},
			}
			err := a.Binder.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
			if err != nil {
				klog.InfoS("binding failed (the informer's resync retries)", "pod", klog.KObj(pod), "err", err)
				continue
			}
			a.Recorder.Eventf(pod, v1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, a.Cfg.NodeName)
		}
	}
}
