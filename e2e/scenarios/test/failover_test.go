package scenariotest

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/scenarios/kube"
)

// scenarioLeaderFailover (6): the leading operator pod is deleted under traffic; a follower
// leads within the lease duration (15 s), no request fails (every shard stays assigned), and
// no shard moves.
func scenarioLeaderFailover(c sc, s *suite) {
	s.waitSteady(c, 3)
	s.waitOperators(c, 2*time.Minute)
	lease := s.lease(c)
	old := kube.Holder(lease)
	if old == "" {
		c.fatalf("Lease %s/%s has no holder", s.cfg.kshardNS, leaseName)
	}
	if m := s.latest(); m.Status.Manager.Pod != old {
		c.errorf("status.manager names %q, the Lease %q", m.Status.Manager.Pod, old)
	}
	c.r.figure("deleted leader", old)

	t0 := time.Now()
	ctx, cancel := apiCtx()
	err := s.cs.CoreV1().Pods(s.cfg.kshardNS).Delete(ctx, old, metav1.DeleteOptions{})
	cancel()
	if err != nil {
		c.fatalf("deleting the leading operator pod %s: %v", old, err)
	}
	var newHolder string
	var acquired time.Time
	leads := c.waitUntil(2*time.Minute, "another operator replica holds the Lease", func() (bool, string) {
		ctx, cancel := apiCtx()
		defer cancel()
		l, err := s.cs.CoordinationV1().Leases(s.cfg.kshardNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h := kube.Holder(l)
		if h == "" || h == old {
			return false, fmt.Sprintf("holder %q", h)
		}
		newHolder = h
		if l.Spec.AcquireTime != nil {
			acquired = l.Spec.AcquireTime.Time
		}
		return true, ""
	})
	c.r.figure("new leader", newHolder)
	c.r.figure("delete → new Lease holder seen", ms(leads))
	if !acquired.IsZero() && acquired.After(t0) {
		c.r.figure("delete → Lease acquireTime", ms(acquired.Sub(t0)))
	}
	if leads > leaseDuration {
		c.errorf("the follower took %s to lead, more than the lease duration %s", leads, leaseDuration)
	}
	c.waitUntil(time.Minute, "status.manager names the new leader", func() (bool, string) {
		m := s.latest()
		return m.Status.Manager.Pod == newHolder, m.Describe()
	})
	c.r.figure("delete → status.manager names the new leader (seen)", ms(time.Since(t0)))

	// The new leader's takeover round re-sends every assignment; watch a few periodic rounds
	// (and the replacement replica's start) for moves and failures.
	s.waitOperators(c, 2*time.Minute)
	observeUntil := time.Now().Add(3 * 5 * time.Second)
	c.waitUntil(time.Minute, "three periodic rounds pass without a shard move", func() (bool, string) {
		if mv := s.history().Moves(t0, time.Now()); mv.Total > 0 {
			c.fatalf("%d shards moved after the leader was deleted (want 0): %s", mv.Total, s.latest().Describe())
		}
		return time.Now().After(observeUntil), "observing"
	})
	end := time.Now()
	mv := s.history().Moves(t0, end)
	c.r.figure("shard moves", mv.Total)
	c.r.figure("epochs", fmt.Sprintf("%d → %d", mv.EpochStart, mv.EpochEnd))
	st := s.window(c, t0, end)
	c.r.figure("failed requests", st.Failed)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed during the failover (want 0): %v", st.Failed, st.Sent, c.r.Requests[continuousDriver].FailReasons)
	}
}

func (s *suite) lease(c sc) *coordinationv1.Lease {
	c.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	l, err := s.cs.CoordinationV1().Leases(s.cfg.kshardNS).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		c.fatalf("Lease %s/%s: %v", s.cfg.kshardNS, leaseName, err)
	}
	return l
}

// operatorDeployment finds the chart's operator Deployment and its pods.
func (s *suite) operatorDeployment() (*appsv1.Deployment, []v1.Pod, error) {
	return kube.OperatorDeployment(s.cs, s.cfg.kshardNS)
}

// waitOperators waits until every operator replica is up and ready, and none is terminating.
func (s *suite) waitOperators(c sc, timeout time.Duration) {
	c.Helper()
	c.waitUntil(timeout, "every operator replica is ready", func() (bool, string) {
		return kube.OperatorsSettled(s.cs, s.cfg.kshardNS)
	})
}
