package scenariotest

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
)

const (
	skewedDriver = "skewed"
	// Zipf-skewed increments over entities whose shards start on one pod: that pod carries most
	// of the load while the shard counts are even.
	skewedEntities = 100
	skewedExponent = 1.0
	skewedRate     = 150
	// The tolerance the scenario sets: measured busy times on a shared 2-core node are noisy, so
	// a little wider than the default 0.1.
	skewTolerance = 0.2
	// The skew the count placement must show first, so that the balancing has work to do.
	skewAtLeast = 1.5
)

// scenarioSkewedLoad (9): Zipf-skewed traffic (exponent 1.0) on 100 counters whose shards all
// start on one pod. With spec.balance count the status shows that pod far above the mean; with
// spec.balance load the operator moves shards until the busiest pod's measured load is within
// the tolerance (or the hottest shard's bound), with no failed request. It ends back on count
// and balanced within one; the single-owner scenario checks the whole run afterwards.
func scenarioSkewedLoad(c sc, s *suite) {
	s.waitSteady(c, 3)
	m := s.latest()
	hot := m.Registered()[0]
	s.skewed = load.EntitiesOnShards(s.runID+"-z", skewedEntities, shardsOf(m, hot), shardCount)
	if len(s.skewed) < skewedEntities {
		c.fatalf("only %d entities found on the shards of %s", len(s.skewed), hot)
	}
	start := time.Now()
	d := load.Start(load.Config{Name: skewedDriver, Entities: s.skewed, Rate: skewedRate,
		Weights: load.ZipfWeights(len(s.skewed), skewedExponent), Pods: s.pods, Recorder: s.rec,
		Port: publicPort, Timeout: requestTimeout})
	defer d.Stop()
	c.logf("Zipf traffic at %d/s on %d counters, all on the shards of %s", skewedRate, len(s.skewed), hot)

	skewed := c.waitUntil(4*time.Minute, fmt.Sprintf("status.load shows the skew (peak-to-mean above %.1f) with balance count", skewAtLeast),
		func() (bool, string) {
			l := s.latest().Status.Load
			if l == nil {
				return false, "no status.load yet"
			}
			return l.PeakToMean > skewAtLeast, describeLoad(s.latest())
		})
	before := s.latest()
	c.r.figure("with balance count", describeLoad(before))

	switched := time.Now()
	s.patchMapSpec(c, fmt.Sprintf(`{"spec":{"balance":"load","loadTolerance":%g}}`, skewTolerance))
	c.waitUntil(5*time.Minute, "the busiest pod's load within the tolerance or the hottest shard's bound", func() (bool, string) {
		m := s.latest()
		l := m.Status.Load
		if m.Status.ObservedGeneration < m.Generation || l == nil {
			return false, "the operator has not acted on balance: load yet"
		}
		cond, _ := m.Condition("Balanced")
		ok := cond.Reason == "LoadBalanced" && l.PeakToMean <= math.Max(1+skewTolerance, l.Bound)*1.005
		return ok, describeLoad(m) + "; Balanced: " + cond.Reason
	})
	end := time.Now()
	within := end.Sub(switched)
	after := s.latest()
	mv := s.history().Moves(switched, end)
	c.r.figure("skew seen after", secs(skewed))
	c.r.figure("with balance load", describeLoad(after))
	c.r.figure("within the tolerance, after switching to load", secs(within))
	c.r.figure("shard moves", fmt.Sprintf("%d in all, %d shards moved, at most %d per shard", mv.Total, mv.ShardsMoved, mv.Max))
	c.r.figure("shards per pod", fmt.Sprint(after.Counts()))
	s.checkTopPods(c, after)
	if mv.Total == 0 {
		c.errorf("no shard moved, yet the load was skewed: %s", describeLoad(before))
	}
	st := s.window(c, start, end, skewedDriver, continuousDriver)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed while balancing by load (want 0): %v", st.Failed, st.Sent, c.r.Requests[skewedDriver].FailReasons)
	}
	d.Stop()
	s.checkAcknowledged(c, s.skewed)

	// Back to the default: the counts even out again (moving shards, under the continuous load).
	s.patchMapSpec(c, `{"spec":{"balance":"count"}}`)
	c.r.figure("balanced by count again after", secs(s.waitBalancedOver(c, 3, 4*time.Minute)))
}

// checkTopPods runs the kubectl plugin (`kubectl kshard top pods`, build/bin/kubectl-kshard) as a
// user would: it must show the balance mode and every registered pod; its output goes to the report.
func (s *suite) checkTopPods(c sc, m *shardmap.ShardMap) {
	c.Helper()
	plugin := filepath.Join(s.cfg.repoRoot, "build", "bin", "kubectl-kshard")
	out, err := kube.RunCommand(30*time.Second, s.cfg.repoRoot, plugin, "top", "pods",
		"--kubeconfig", s.cfg.kubeconfig, "-n", s.cfg.counterNS, s.cfg.counterName)
	if err != nil {
		c.errorf("kubectl kshard top pods: %v", err)
		return
	}
	c.logf("kubectl kshard top pods -n %s %s:\n%s", s.cfg.counterNS, s.cfg.counterName, out)
	c.r.figure("kubectl kshard top pods", strings.Join(strings.Split(strings.TrimSpace(out), "\n"), " / "))
	if !strings.Contains(out, "balance load") {
		c.errorf("kubectl kshard top pods does not show the balance mode:\n%s", out)
	}
	for _, p := range m.Status.Pods {
		if !strings.Contains(out, p.Name) {
			c.errorf("kubectl kshard top pods does not list pod %s:\n%s", p.Name, out)
		}
	}
}

// patchMapSpec merge-patches the counter's ShardMap and waits until the operator acted on it.
func (s *suite) patchMapSpec(c sc, patch string) {
	c.Helper()
	ctx, cancel := apiCtx()
	_, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Patch(ctx, s.cfg.counterName,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	cancel()
	if err != nil {
		c.fatalf("patching ShardMap %s/%s with %s: %v", s.cfg.counterNS, s.cfg.counterName, patch, err)
	}
	c.waitUntil(time.Minute, "the operator observes the ShardMap's new generation", func() (bool, string) {
		m, err := s.getMap()
		if err != nil {
			return false, err.Error()
		}
		return m.Status.ObservedGeneration >= m.Generation,
			fmt.Sprintf("generation %d, observedGeneration %d", m.Generation, m.Status.ObservedGeneration)
	})
}

// checkAcknowledged reads every entity's counter (its driver stopped): each must equal the
// increments it acknowledged. It returns how many did so exactly (no failed increment at all).
func (s *suite) checkAcknowledged(c sc, entities []*load.Entity) (exact int) {
	c.Helper()
	for _, err := range load.ReadAll(s.client, s.pods, entities, 16, time.Now().Add(2*time.Minute)) {
		c.errorf("%v", err)
	}
	var wrong []string
	for _, e := range entities {
		switch {
		case len(e.Violations) > 0:
			wrong = append(wrong, e.Violations...)
		case e.Failed == 0 && e.Last != e.Acked:
			wrong = append(wrong, fmt.Sprintf("%s: value %d, %d acknowledged", e.ID, e.Last, e.Acked))
		case e.Failed == 0:
			exact++
		}
	}
	if len(wrong) > 0 {
		c.errorf("%d counters differ from their acknowledged increments: %s", len(wrong), strings.Join(head(wrong, 10), "; "))
	}
	return exact
}

// describeLoad: "peak-to-mean 1.83 (bound 1.00); pods a 0.41, b 0.12, c 0.10".
func describeLoad(m *shardmap.ShardMap) string {
	l := m.Status.Load
	if l == nil {
		return "no status.load"
	}
	var pods []string
	for _, p := range m.Status.Pods {
		v := "-"
		if p.Load != nil {
			v = fmt.Sprintf("%.3g", *p.Load)
		}
		pods = append(pods, fmt.Sprintf("%s %s (%d shards)", p.Name, v, p.Shards))
	}
	sort.Strings(pods)
	return fmt.Sprintf("peak-to-mean %.2f (bound %.2f); pods %s", l.PeakToMean, l.Bound, strings.Join(pods, ", "))
}
