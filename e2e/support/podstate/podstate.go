// Package podstate reads what a Pod's status says. One copy for the end-to-end suites
// (e2e/support/README.md).
package podstate

import v1 "k8s.io/api/core/v1"

// Ready is the pod's Ready condition: false when the pod has none yet.
func Ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
