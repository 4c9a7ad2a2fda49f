package kubeclient

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kshard.local/e2e/support/wait"
)

// DeleteNamespace deletes a namespace and waits, within timeout, until it is gone. Its workloads
// and pods are deleted first and waited for: the namespace controller waits half the longest
// grace period among the pods it finds still terminating before it looks again (52 s for
// kshard's pods, whose grace period covers a drain), while the pods themselves end a few seconds
// after their drains. A namespace that does not exist is not an error.
func DeleteNamespace(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	}
	all, now := metav1.ListOptions{}, metav1.DeleteOptions{}
	apps := cs.AppsV1()
	for what, del := range map[string]func() error{
		"Deployments":  func() error { return apps.Deployments(name).DeleteCollection(ctx, now, all) },
		"ReplicaSets":  func() error { return apps.ReplicaSets(name).DeleteCollection(ctx, now, all) },
		"StatefulSets": func() error { return apps.StatefulSets(name).DeleteCollection(ctx, now, all) },
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the %s of namespace %s: %w", what, name, err)
		}
	}
	// Pods are deleted on every look, so that one a controller made in the meantime goes too.
	if _, err := wait.Until(time.Until(deadline), 500*time.Millisecond, func() (bool, string) {
		pods, err := cs.CoreV1().Pods(name).List(ctx, all)
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) == 0 {
			return true, ""
		}
		if err := cs.CoreV1().Pods(name).DeleteCollection(ctx, now, all); err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("%d pods left", len(pods.Items))
	}); err != nil {
		return fmt.Errorf("the pods of namespace %s did not end: %w", name, err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, name, now); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	if _, err := wait.Until(time.Until(deadline), 500*time.Millisecond, func() (bool, string) {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, conditions %v", ns.Status.Phase, ns.Status.Conditions)
	}); err != nil {
		return fmt.Errorf("namespace %s was not deleted: %w", name, err)
	}
	return nil
}
