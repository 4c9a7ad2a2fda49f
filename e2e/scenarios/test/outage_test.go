package scenariotest

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
)

const outage = 30 * time.Second

// scenarioAPIServerOutage (7): the API server is stopped for 30 s under traffic. Messages keep
// flowing from the sidecars' cached maps (no request fails, replies arrive all along), and once
// it is back the operator leads again, the map is Ready and balanced, and pods are Ready.
func scenarioAPIServerOutage(c sc, s *suite) {
	s.waitSteady(c, 3)
	script := filepath.Join(s.cfg.repoRoot, "e2e", "cluster", "apiserver.sh")
	requireFile(c, script, "the API server script")
	epochBefore := s.latest().Status.Epoch

	t0 := time.Now()
	restarted := false
	start := func() {
		if restarted {
			return
		}
		restarted = true
		if out, err := kube.RunCommand(3*time.Minute, s.cfg.repoRoot, "bash", script, "start"); err != nil {
			c.errorf("starting the API server: %v\n%s", err, out)
		}
	}
	// Whatever happens, the API server comes back for the scenarios after this one.
	defer start()
	if out, err := kube.RunCommand(2*time.Minute, s.cfg.repoRoot, "bash", script, "stop"); err != nil {
		c.fatalf("stopping the API server: %v\n%s", err, out)
	}
	stopped := time.Now()
	c.logf("API server stopped (took %s); traffic continues for %s", secs(stopped.Sub(t0)), outage)
	c.r.figure("stop took", secs(stopped.Sub(t0)))

	// Replies must keep arriving all along: every 5 s of the outage has acknowledged requests.
	quiet := 0
	c.waitUntil(outage+10*time.Second, fmt.Sprintf("the API server stays down for %s", outage), func() (bool, string) {
		now := time.Now()
		if now.Sub(stopped) >= 5*time.Second {
			st := load.Summarize(load.Of(s.rec.Between(now.Add(-5*time.Second), now), continuousDriver), 5*time.Second)
			if st.Acked == 0 && now.Sub(t0) > 5*time.Second {
				quiet++
			}
		}
		return now.Sub(stopped) >= outage, "waiting"
	})
	restartAt := time.Now()
	start()
	back := time.Now()
	c.r.figure("API server down", secs(back.Sub(stopped)))
	c.r.figure("start took", secs(back.Sub(restartAt)))
	if quiet > 0 {
		c.errorf("%d checks during the outage saw no acknowledged request in the previous 5 s", quiet)
	}
	during := load.Summarize(load.Of(s.rec.Overlapping(stopped, restartAt), continuousDriver), restartAt.Sub(stopped))
	c.r.figure("requests while the API server was down", fmt.Sprintf("%d sent, %d acknowledged, %d failed", during.Sent, during.Acked, during.Failed))

	// Recovery of kshard: a leader renews the Lease and names itself in status.manager, and the
	// map is Ready and balanced over the same pods. The map is read from the API server itself:
	// the test's own watch may still be relisting.
	c.waitUntil(3*time.Minute, "an operator leads again and the ShardMap is Ready and balanced", func() (bool, string) {
		ctx, cancel := apiCtx()
		defer cancel()
		l, err := s.cs.CoordinationV1().Leases(s.cfg.kshardNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(back) || kube.Holder(l) == "" {
			return false, fmt.Sprintf("Lease holder %q renewed %v", kube.Holder(l), l.Spec.RenewTime)
		}
		m, err := s.getMap()
		if err != nil {
			return false, err.Error()
		}
		if ok, msg := m.Balanced(3); !ok || !m.IsTrue("Ready") || m.Status.Manager.Pod != kube.Holder(l) {
			return false, fmt.Sprintf("Lease holder %s; %s", kube.Holder(l), msg)
		}
		if !slices.Equal(m.Registered(), s.podNames()) {
			return false, fmt.Sprintf("registered %v, running %v", m.Registered(), s.podNames())
		}
		return true, ""
	})
	c.r.figure("API server back → an operator leads, ShardMap Ready and balanced", secs(time.Since(back)))

	// Recovery of the cluster around kshard, reported: the node lifecycle controller marks the
	// node's pods NotReady when the API server returns (it missed the node's heartbeats) until
	// the kubelet posts their status again.
	c.waitUntil(3*time.Minute, "the counter pods are Ready again", func() (bool, string) { return s.deploymentSettled(3) })
	c.r.figure("API server back → counter pods Ready again (kubelet)", secs(time.Since(back)))
	s.waitOperators(c, 2*time.Minute)
	c.r.figure("API server back → operator pods Ready again (kubelet)", secs(time.Since(back)))
	s.waitServiceEndpoints(c)
	end := time.Now()
	mv := s.history().Moves(t0, end)
	c.r.figure("shard moves", mv.Total)
	if m, err := s.getMap(); err == nil {
		c.r.figure("epochs", fmt.Sprintf("%d → %d", epochBefore, m.Status.Epoch))
	}
	st := s.window(c, t0, end)
	c.r.figure("failed requests (stop → recovered)", st.Failed)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed during the outage and recovery (want 0): %v", st.Failed, st.Sent, c.r.Requests[continuousDriver].FailReasons)
	}
}

// waitServiceEndpoints waits until every Service of the operator has ready Endpoints, touching
// one the controller-manager left stale after the restart (kube.ResyncServiceEndpoints); the
// scenario reports that as a note.
func (s *suite) waitServiceEndpoints(c sc) {
	c.Helper()
	note := func(msg string) { c.r.note("%s", msg) }
	if err := kube.ResyncServiceEndpoints(s.cs, s.cfg.kshardNS, time.Minute, note); err != nil {
		c.fatalf("%v", err)
	}
}
