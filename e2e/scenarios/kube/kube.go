// Package kube is what the end-to-end suites (e2e/scenarios, e2e/nemesis) need from the local
// cluster's API: clients, a view of the counter's pods and of its ShardMap kept by informers, the
// state of Deployments, the operator's Lease and Services, and polling with a deadline. Every call
// is bounded in time, so that a call made while the API server is away fails instead of hanging.
package kube

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kshard.local/e2e/support/kubeclient"
	"kshard.local/e2e/support/podstate"
)

// CallTimeout bounds one API call.
const CallTimeout = 10 * time.Second

// Ctx is the context of one API call.
func Ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), CallTimeout)
}

// NewClients returns a typed and a dynamic client for the cluster of kubeconfig.
func NewClients(kubeconfig string) (*kubernetes.Clientset, dynamic.Interface, error) {
	c, err := kubeclient.Load(kubeconfig, kubeclient.Limits{QPS: 50, Burst: 100, Timeout: 15 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	return c.Clientset, c.Dynamic, nil
}

// IsServing says whether the pod can take requests: not terminating, with an IP, and every
// container (the injected native sidecar included) passes its readiness probe. The containers'
// readiness is used rather than the pod's Ready condition because the node lifecycle controller
// sets that condition False on every pod of a node whose heartbeats it missed (after an API server
// outage) until the kubelet next posts the pod's status, while the processes serve all along.
func IsServing(p *v1.Pod) bool {
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

// DeploymentSettled says whether a Deployment runs exactly `replicas` up-to-date, ready pods and
// nothing else, per its status and the pods themselves.
func DeploymentSettled(d *appsv1.Deployment, pods []*v1.Pod, replicas int32) (bool, string) {
	s := d.Status
	msg := fmt.Sprintf("deployment generation %d observed %d, replicas %d updated %d ready %d available %d; pods %s",
		d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, DescribePods(pods))
	if s.ObservedGeneration < d.Generation || s.Replicas != replicas || s.UpdatedReplicas != replicas ||
		s.ReadyReplicas != replicas || s.AvailableReplicas != replicas || int32(len(pods)) != replicas {
		return false, msg
	}
	for _, p := range pods {
		if !IsServing(p) {
			return false, msg
		}
	}
	return true, msg
}

// DescribePods is a one-line summary of pods: name, state and version label.
func DescribePods(pods []*v1.Pod) string {
	var parts []string
	for _, p := range pods {
		state := "not-ready"
		switch {
		case p.DeletionTimestamp != nil:
			state = "terminating"
		case podstate.Ready(p):
			state = "ready"
		}
		parts = append(parts, fmt.Sprintf("%s(%s,v%s)", p.Name, state, p.Labels["app.kubernetes.io/version"]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Holder is the Lease's holder, "" when none.
func Holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// OperatorDeployment finds the chart's operator Deployment in ns and its pods.
func OperatorDeployment(cs kubernetes.Interface, ns string) (*appsv1.Deployment, []v1.Pod, error) {
	ctx, cancel := Ctx()
	defer cancel()
	ds, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil {
		return nil, nil, err
	}
	if len(ds.Items) != 1 {
		return nil, nil, fmt.Errorf("%d Deployments labelled app.kubernetes.io/component=operator in %s, want 1", len(ds.Items), ns)
	}
	d := &ds.Items[0]
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, nil, err
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, err
	}
	return d, pods.Items, nil
}

// OperatorsSettled says whether every replica of the operator Deployment is up and ready, and
// none is terminating.
func OperatorsSettled(cs kubernetes.Interface, ns string) (bool, string) {
	d, pods, err := OperatorDeployment(cs, ns)
	if err != nil {
		return false, err.Error()
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	var ptrs []*v1.Pod
	for i := range pods {
		ptrs = append(ptrs, &pods[i])
	}
	return DeploymentSettled(d, ptrs, want)
}

// RunCommand runs a program with a deadline and returns its combined output.
func RunCommand(timeout time.Duration, dir, name string, args ...string) (string, error) {
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

// TerminationConfirmed says whether the kubelet has confirmed, in the pod's status, that nothing
// of the pod runs any more: the pod is deleting (or finished) and every container has a
// terminated state. It is the operator's rule for moving a pod's shards at once
// (operator/pod_directory.cc, terminationConfirmed).
func TerminationConfirmed(p *v1.Pod) bool {
	final := p.DeletionTimestamp != nil || p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded
	statuses := append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, c := range statuses {
		if c.State.Terminated == nil {
			return false
		}
	}
	return final && len(statuses) > 0
}
