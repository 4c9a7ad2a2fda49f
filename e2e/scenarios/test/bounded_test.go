package scenariotest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/scenarios/eventlog"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
)

const (
	boundedDriver = "bounded"
	// The limit the scenario sets: well below the ~100 continuous counters each pod runs.
	boundedLimit = 20
	// New counters flooded in, ten times the limit per pod, each incremented a few times.
	boundedEntities   = 600
	boundedIncrements = 2
	boundedRate       = 150
)

// scenarioBoundedEntities: spec.maxActiveEntitiesPerPod is set to 20 under the continuous
// load. Once the counter's event log shows every pod at 20 active counters or fewer (the lower
// limit passivated the rest), 600 new counters × 2 increments flood in. From then on, through the
// read-back, the event log shows no pod with more than 20 counters active at once; every flooded
// counter equals its acknowledged increments, and no request failed. The spec is restored at the
// end, pass or fail.
func scenarioBoundedEntities(c sc, s *suite) {
	s.waitSteady(c, 3)
	original := s.maxActiveEntitiesPerPod(c)
	c.Cleanup(func() { s.restoreMaxActiveEntitiesPerPod(c, original) })
	s.patchMapSpec(c, fmt.Sprintf(`{"spec":{"maxActiveEntitiesPerPod":%d}}`, boundedLimit))
	pods := s.podNames()
	c.r.figure("spec.maxActiveEntitiesPerPod", fmt.Sprintf("%d (was %s)", boundedLimit, original))

	lowered := c.waitUntil(3*time.Minute, fmt.Sprintf("every pod's app runs at most %d counters", boundedLimit), func() (bool, string) {
		now := time.Now()
		peaks, err := s.mostActive(c, now, now)
		if err != nil {
			return false, err.Error()
		}
		for _, pod := range pods {
			if peaks[pod].Active > boundedLimit {
				return false, describePeaks(peaks, pods)
			}
		}
		return true, ""
	})
	c.r.figure("down to the limit after", secs(lowered))

	flood := numberedEntities(s.runID+"-b", boundedEntities, shardCount)
	start := time.Now()
	d := load.Start(load.Config{Name: boundedDriver, Entities: flood, Rate: boundedRate,
		Increments: boundedIncrements, Pods: s.pods, Recorder: s.rec, Port: publicPort, Timeout: requestTimeout})
	defer d.Stop()
	waitDriven(c, d, boundedEntities*boundedIncrements, boundedRate)
	floodEnd := time.Now()
	st := s.window(c, start, floodEnd, boundedDriver, continuousDriver)
	fl := c.r.Requests[boundedDriver]
	c.r.figure("flood", fmt.Sprintf("%d new counters × %d: %d sent, %d acknowledged, %d failed; p99 %.0f ms",
		boundedEntities, boundedIncrements, fl.Sent, fl.Acked, fl.Failed, fl.P99))
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed under the limit (flood and continuous drivers): %v %v", st.Failed, st.Sent,
			c.r.Requests[boundedDriver].FailReasons, c.r.Requests[continuousDriver].FailReasons)
	}
	exact := s.checkAcknowledged(c, flood)
	c.r.figure("flooded counters equal to their acknowledged increments", fmt.Sprintf("%d of %d", exact, len(flood)))

	peaks, err := s.mostActive(c, start, time.Now())
	if err != nil {
		c.fatalf("%v", err)
	}
	c.r.figure("most counters active at once per pod (event log)", describePeaks(peaks, pods))
	most := 0
	for _, pod := range pods {
		p := peaks[pod]
		most = max(most, p.Active)
		if p.Active > boundedLimit {
			c.errorf("pod %s ran %d counters at once at %s, above the limit %d", pod, p.Active,
				p.At.Format("15:04:05.000000"), boundedLimit)
		}
	}
	// The flood must have filled the pods, or the check above proved nothing.
	if most < boundedLimit*3/4 {
		c.errorf("no pod came near the limit (most %d active at once): the flood did not test it", most)
	}
}

// mostActive reads the counter's event log and returns each pod's most counters active at once
// during [from, to] (eventlog.MostActive).
func (s *suite) mostActive(c sc, from, to time.Time) (map[string]eventlog.Peak, error) {
	c.Helper()
	events, _, err := s.readEventLog()
	if err != nil {
		return nil, err
	}
	return eventlog.MostActive(events, s.deathTimes(), from, to), nil
}

// maxActiveEntitiesPerPod is the ShardMap's spec.maxActiveEntitiesPerPod as the API server has
// it: a number, or "unset".
func (s *suite) maxActiveEntitiesPerPod(c sc) string {
	c.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	u, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	if err != nil {
		c.fatalf("getting ShardMap %s/%s: %v", s.cfg.counterNS, s.cfg.counterName, err)
	}
	v, found, err := unstructured.NestedInt64(u.Object, "spec", "maxActiveEntitiesPerPod")
	if err != nil {
		c.fatalf("spec.maxActiveEntitiesPerPod of ShardMap %s: %v", s.cfg.counterName, err)
	}
	if !found {
		return "unset"
	}
	return fmt.Sprint(v)
}

// restoreMaxActiveEntitiesPerPod puts the spec back as maxActiveEntitiesPerPod found it; it runs
// as a cleanup, after a failure too, and so reports instead of stopping.
func (s *suite) restoreMaxActiveEntitiesPerPod(c sc, original string) {
	value := original
	if original == "unset" {
		value = "null"
	}
	patch := fmt.Sprintf(`{"spec":{"maxActiveEntitiesPerPod":%s}}`, value)
	ctx, cancel := apiCtx()
	defer cancel()
	_, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Patch(ctx, s.cfg.counterName,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		c.errorf("restoring ShardMap %s/%s with %s: %v", s.cfg.counterNS, s.cfg.counterName, patch, err)
		return
	}
	c.logf("restored spec.maxActiveEntitiesPerPod of ShardMap %s to %s", s.cfg.counterName, original)
}

// describePeaks: "pod-a 20, pod-b 19, pod-c 20", for the given pods in name order.
func describePeaks(peaks map[string]eventlog.Peak, pods []string) string {
	sorted := append([]string(nil), pods...)
	sort.Strings(sorted)
	parts := make([]string, 0, len(sorted))
	for _, pod := range sorted {
		parts = append(parts, fmt.Sprintf("%s %d", pod, peaks[pod].Active))
	}
	return strings.Join(parts, ", ")
}
