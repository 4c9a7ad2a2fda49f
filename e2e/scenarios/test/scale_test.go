package scenariotest

import (
	"fmt"
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scenarioScale (3): 3 → 6 → 2 replicas under traffic; after each step the map is balanced
// within one over exactly the Deployment's pods, and no request fails.
func scenarioScale(c sc, s *suite) {
	s.waitSteady(c, 3)
	start := time.Now()
	for _, replicas := range []int32{6, 2} {
		stepStart := time.Now()
		s.scale(c, replicas)
		took := s.waitBalancedOver(c, replicas, 6*time.Minute)
		mv := s.history().Moves(stepStart, time.Now())
		m := s.latest()
		c.r.figure(fmt.Sprintf("to %d: balanced after", replicas), secs(took))
		c.r.figure(fmt.Sprintf("to %d: shards per pod", replicas), fmt.Sprint(mustCounts(m)))
		c.r.figure(fmt.Sprintf("to %d: shard moves", replicas), fmt.Sprintf("%d (max %d per shard)", mv.Total, mv.Max))
		c.logf("scaled to %d: balanced after %s, %d moves: %s", replicas, secs(took), mv.Total, m.Describe())
	}
	st := s.window(c, start, time.Now())
	c.r.figure("failed requests", st.Failed)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed while scaling (want 0): %v", st.Failed, st.Sent, c.r.Requests[continuousDriver].FailReasons)
	}
}

// scale sets the counter Deployment's replicas.
func (s *suite) scale(c sc, replicas int32) {
	c.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	_, err := s.cs.AppsV1().Deployments(s.cfg.counterNS).UpdateScale(ctx, s.cfg.counterName,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.counterName, Namespace: s.cfg.counterNS},
			Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}, metav1.UpdateOptions{})
	if err != nil {
		c.fatalf("scaling deployment %s/%s to %d: %v", s.cfg.counterNS, s.cfg.counterName, replicas, err)
	}
	c.logf("scaled deployment %s to %d replicas", s.cfg.counterName, replicas)
}

// waitBalancedOver waits until the Deployment runs `replicas` ready pods, exactly those are
// registered, and the map is balanced within one; it returns how long that took.
func (s *suite) waitBalancedOver(c sc, replicas int32, timeout time.Duration) time.Duration {
	c.Helper()
	return c.waitUntil(timeout, fmt.Sprintf("%d pods running, registered and balanced within one", replicas), func() (bool, string) {
		if ok, msg := s.deploymentSettled(replicas); !ok {
			return false, msg
		}
		m := s.latest()
		if ok, msg := m.Balanced(int(replicas)); !ok {
			return false, msg
		}
		if !slices.Equal(m.Registered(), s.podNames()) {
			return false, fmt.Sprintf("registered %v, running %v", m.Registered(), s.podNames())
		}
		return true, ""
	})
}

// waitSteady is the starting point of a scenario: `replicas` pods, balanced, Ready.
func (s *suite) waitSteady(c sc, replicas int32) {
	c.Helper()
	s.waitBalancedOver(c, replicas, 6*time.Minute)
	c.waitUntil(time.Minute, "ShardMap Ready", func() (bool, string) {
		m := s.latest()
		return m.IsTrue("Ready"), m.Describe()
	})
}

func (s *suite) podNames() []string {
	var out []string
	for _, p := range s.pods.All() {
		out = append(out, p.Name)
	}
	return out
}
