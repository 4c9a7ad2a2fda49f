package kube

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"kshard.local/e2e/support/wait"
)

// ResyncServiceEndpoints waits until every Service of ns with a selector has a ready address in
// its v1 Endpoints, which the API server uses to call the webhook. After an API server restart the
// controller-manager's endpoints controller can drop a Service from its queue ("endpoints
// informer cache is out of date") and leave its Endpoints stale although the EndpointSlices are
// right; the webhook is then unreachable ("no endpoints available") and, with failurePolicy Fail,
// no annotated pod can be created. That is the cluster's doing, not kshard's: note is told, the
// Service is touched, which makes the controller sync it again, and the wait goes on until timeout.
func ResyncServiceEndpoints(cs kubernetes.Interface, ns string, timeout time.Duration, note func(string)) error {
	ctx, cancel := Ctx()
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("listing the Services of %s: %w", ns, err)
	}
	for _, svc := range svcs.Items {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		name := svc.Name
		ready := func() (bool, string) {
			ctx, cancel := Ctx()
			defer cancel()
			ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, ss := range ep.Subsets {
				if len(ss.Addresses) > 0 {
					return true, ""
				}
			}
			return false, fmt.Sprintf("Endpoints %s has no ready address (resourceVersion %s)", name, ep.ResourceVersion)
		}
		if _, err := wait.Until(20*time.Second, 500*time.Millisecond, ready); err == nil {
			continue
		}
		note(fmt.Sprintf("after the API server restart the controller-manager left the v1 Endpoints of Service %s/%s without ready addresses although its pods were Ready (see its log: \"endpoints informer cache is out of date\"); touched the Service to make it sync again", ns, name))
		ctx, cancel := Ctx()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.kshard.io/resync":%q}}}`, time.Now().Format(time.RFC3339Nano))
		_, err := cs.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("touching Service %s: %w", name, err)
		}
		if _, err := wait.Until(timeout, 500*time.Millisecond, ready); err != nil {
			return fmt.Errorf("Service %s has no ready Endpoints: %w", name, err)
		}
	}
	return nil
}
