package scenariotest

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/scenarios/shardmap"
)

const (
	oldVersion = "1.0.0"
	newVersion = "1.1.0"
)

// scenarioRollingUpdate (4): the counter's pod template goes from 1.0.0 to 1.1.0 (version label
// and image) under traffic: no request fails, every shard moves at most once, and at the end
// every shard is on a 1.1.0 pod.
func scenarioRollingUpdate(c sc, s *suite) {
	// Back to the example's 3 replicas (scenario 3 ended on 2); not part of the measurement.
	s.scale(c, 3)
	s.waitSteady(c, 3)

	start := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{%q:%q}},"spec":{"containers":[{"name":"app","image":%q}]}}}}`,
		versionLabel, newVersion, s.cfg.counterImageOf(newVersion))
	ctx, cancel := apiCtx()
	_, err := s.cs.AppsV1().Deployments(s.cfg.counterNS).Patch(ctx, s.cfg.counterName, types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{})
	cancel()
	if err != nil {
		c.fatalf("patching deployment %s to %s: %v", s.cfg.counterName, newVersion, err)
	}
	c.logf("deployment %s: pod template now %s", s.cfg.counterName, newVersion)

	rolled := c.waitUntil(8*time.Minute, "the rollout completes and every shard is on a "+newVersion+" pod", func() (bool, string) {
		if ok, msg := s.deploymentSettled(3); !ok {
			return false, msg
		}
		for _, p := range s.pods.All() {
			if p.Labels[versionLabel] != newVersion {
				return false, "pod " + p.Name + " is still " + p.Labels[versionLabel]
			}
		}
		m := s.latest()
		if off := shardsNotOnVersion(m, newVersion); off != "" {
			return false, off
		}
		return true, ""
	})
	// The moves of a rollout include any balancing right after it.
	settled := s.waitBalancedOver(c, 3, 3*time.Minute)
	end := time.Now()

	mv := s.history().Moves(start, end)
	m := s.latest()
	c.r.figure("rollout (3 pods) done after", secs(rolled))
	c.r.figure("balanced after the rollout", secs(settled))
	c.r.figure("shard moves", fmt.Sprintf("%d in all, %d shards moved, at most %d per shard", mv.Total, mv.ShardsMoved, mv.Max))
	c.r.figure("epochs", fmt.Sprintf("%d → %d", mv.EpochStart, mv.EpochEnd))
	c.r.figure("shards per pod at the end", fmt.Sprint(mustCounts(m)))
	if mv.Max > 1 {
		var twice []int
		for i, n := range mv.PerShard {
			if n > 1 {
				twice = append(twice, i+1)
			}
		}
		c.errorf("%d shards moved more than once during the rollout (want at most once): %v", len(twice), twice)
	}
	if mv.ShardsMoved < shardCount {
		c.r.note("%d of %d shards were seen moving (the watch may coalesce versions)", mv.ShardsMoved, shardCount)
	}
	if off := shardsNotOnVersion(m, newVersion); off != "" {
		c.errorf("at the end: %s", off)
	}
	st := s.window(c, start, end)
	c.r.figure("failed requests", st.Failed)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed during the rollout (want 0): %v", st.Failed, st.Sent, c.r.Requests[continuousDriver].FailReasons)
	}
}

// shardsNotOnVersion says which shards are not on a registered pod of that version ("" if none).
func shardsNotOnVersion(m *shardmap.ShardMap, version string) string {
	versions := map[string]string{}
	for _, p := range m.Status.Pods {
		versions[p.Name] = p.Version
	}
	off := map[string]int{}
	for _, o := range m.Owners {
		if o == "" || versions[o] != version {
			off[fmt.Sprintf("%s (v%s)", o, versions[o])]++
		}
	}
	if len(off) == 0 {
		return ""
	}
	return fmt.Sprintf("shards not on a %s pod, by owner: %v; %s", version, off, m.Describe())
}
