package scenariotest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/scenarios/eventlog"
	"kshard.local/e2e/scenarios/shardid"
	"kshard.local/e2e/scenarios/shardmap"
)

const (
	// How many counters the scenario makes remembered, each touched by one increment.
	rememberedCount = 12
	// How long after its shard moved (its old pod gone, or the map balanced after a scale) a
	// remembered counter may take to be active again on its new owner.
	rememberedBound = time.Minute
)

var shardEntitiesGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardentities"}

// scenarioRemembered: the counter's ShardMap remembers the type "counter" (spec.
// rememberedEntityTypes, restored afterwards). K new counters are touched once each and are
// recorded in their shards' ShardEntities records. Then, with no further message to any of them:
// the pod that runs most of them is SIGKILLed and deleted (as in the crash scenario), and the
// map is scaled 3 → 4 → 3, which moves others. After each step every one of them must be active
// again on the owner of its shard within rememberedBound, by the counter's event log, and the
// log must never show one active on two pods at once.
func scenarioRemembered(c sc, s *suite) {
	s.waitSteady(c, 3)
	s.rememberCounters(c)
	ids := s.touchRemembered(c)
	c.r.figure("remembered counters (one increment each)", len(ids))
	s.waitRememberedOnOwners(c, ids, "after the touch")

	victim := podWithMost(s.latest(), ids)
	c.r.figure("killed pod (runs the most of them)", victim)
	s.killAndDelete(c, victim)
	took := s.waitRememberedOnOwners(c, ids, "after "+victim+" was killed")
	c.r.figure("pod gone → every remembered counter active on its new owner", ms(took))
	s.waitBalancedOver(c, 3, 6*time.Minute)

	for _, replicas := range []int32{4, 3} {
		before := s.latest()
		s.scale(c, replicas)
		s.waitBalancedOver(c, replicas, 6*time.Minute)
		moved := movedIDs(before, s.latest(), ids)
		c.r.figure(fmt.Sprintf("remembered counters moved by the scale to %d", replicas), len(moved))
		took := s.waitRememberedOnOwners(c, ids, fmt.Sprintf("after the scale to %d", replicas))
		c.r.figure(fmt.Sprintf("balanced over %d → every remembered counter on its owner", replicas), ms(took))
	}

	res := eventlog.Check(s.rememberedEvents(c, ids), s.deathTimes())
	c.r.figure("their activations / stops / handoffs", fmt.Sprintf("%d / %d / %d", res.Activations, res.Stops, res.Handoffs))
	if len(res.Overlaps) > 0 {
		c.errorf("%d times a remembered counter was active on two pods at once: %s", len(res.Overlaps), strings.Join(head(res.Overlaps, 10), "; "))
	}
	if len(res.Anomalies) > 0 {
		c.errorf("%d inconsistent event sequences of remembered counters: %s", len(res.Anomalies), strings.Join(head(res.Anomalies, 10), "; "))
	}
}

// rememberCounters sets spec.rememberedEntityTypes to ["counter"], and puts the previous value
// back when the scenario ends.
func (s *suite) rememberCounters(c sc) {
	ctx, cancel := apiCtx()
	u, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	cancel()
	if err != nil {
		c.fatalf("reading the ShardMap: %v", err)
	}
	previous, found, _ := unstructured.NestedStringSlice(u.Object, "spec", "rememberedEntityTypes")
	var restore any
	if found {
		restore = previous
	}
	s.patchRememberedTypes(c, []string{"counter"})
	c.Cleanup(func() { s.patchRememberedTypes(c, restore) })
}

func (s *suite) patchRememberedTypes(c sc, value any) {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"rememberedEntityTypes": value}})
	ctx, cancel := apiCtx()
	defer cancel()
	if _, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Patch(ctx, s.cfg.counterName,
		types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.errorf("setting spec.rememberedEntityTypes to %v: %v", value, err)
	}
}

// touchRemembered sends one increment to each of rememberedCount new counters and waits until
// each is in a ShardEntities record. A counter that a sidecar took before it applied the spec is
// a plain one (never recorded): it is left alone and another new counter takes its place.
func (s *suite) touchRemembered(c sc) []string {
	var ids []string
	touched := map[string]time.Time{}
	next := 0
	c.waitUntil(2*time.Minute, fmt.Sprintf("%d new counters touched once and recorded", rememberedCount), func() (bool, string) {
		recorded := s.recordedIDs(c)
		var kept []string
		for _, id := range ids {
			if recorded[id] || time.Since(touched[id]) < 10*time.Second {
				kept = append(kept, id)
			}
		}
		ids = kept
		for len(ids) < rememberedCount {
			id := fmt.Sprintf("%s-r-%d", s.runID, next)
			next++
			if q, _, err := s.client.Send(s.pods, id, true); !q.OK {
				c.logf("touching %s: %v (another takes its place)", id, err)
				continue
			}
			touched[id] = time.Now()
			ids = append(ids, id)
		}
		n := 0
		for _, id := range ids {
			if recorded[id] {
				n++
			}
		}
		return n == rememberedCount, fmt.Sprintf("%d of %d recorded", n, len(ids))
	})
	return ids
}

// recordedIDs are the counter ids the ShardMap's ShardEntities records list.
func (s *suite) recordedIDs(c sc) map[string]bool {
	ctx, cancel := apiCtx()
	defer cancel()
	list, err := s.dyn.Resource(shardEntitiesGVR).Namespace(s.cfg.counterNS).List(ctx, metav1.ListOptions{
		LabelSelector: "kshard.io/shard-map=" + s.cfg.counterName})
	if err != nil {
		c.logf("listing ShardEntities: %v", err)
		return nil
	}
	out := map[string]bool{}
	for _, item := range list.Items {
		entities, _, _ := unstructured.NestedSlice(item.Object, "spec", "entities")
		for _, e := range entities {
			if m, ok := e.(map[string]any); ok && m["type"] == "counter" {
				if id, ok := m["id"].(string); ok {
					out[id] = true
				}
			}
		}
	}
	return out
}

// waitRememberedOnOwners waits until, by the event log, each id is active on the current owner of
// its shard and on no other pod; it returns how long that took.
func (s *suite) waitRememberedOnOwners(c sc, ids []string, when string) time.Duration {
	return c.waitUntil(rememberedBound, "every remembered counter active on its shard's owner "+when, func() (bool, string) {
		events := s.rememberedEvents(c, ids)
		deaths := s.deathTimes()
		m := s.latest()
		var wrong []string
		for _, id := range ids {
			owner := m.Owners[shardid.Of(id, shardCount)-1]
			on := rememberedActiveOn(events, id, deaths)
			if owner == "" || len(on) != 1 || on[0] != owner {
				wrong = append(wrong, fmt.Sprintf("%s on %v, owner %q", id, on, owner))
			}
		}
		return len(wrong) == 0, fmt.Sprintf("%d not yet, e.g. %v", len(wrong), head(wrong, 3))
	})
}

// rememberedEvents are the event log's events of `ids`.
func (s *suite) rememberedEvents(c sc, ids []string) []eventlog.Event {
	events, _, err := s.readEventLog()
	if err != nil {
		c.fatalf("%v", err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []eventlog.Event
	for _, e := range events {
		if want[e.Entity] {
			out = append(out, e)
		}
	}
	return out
}

// rememberedActiveOn lists the pods where `id` is active by the log: its last event there is an
// activation, and no recorded death of that pod came after it.
func rememberedActiveOn(events []eventlog.Event, id string, deaths map[string][]time.Time) []string {
	last := map[string]eventlog.Event{}
	for _, e := range events {
		if e.Entity == id && e.TsUs >= last[e.Pod].TsUs {
			last[e.Pod] = e
		}
	}
	var out []string
	for pod, e := range last {
		dead := false
		for _, d := range deaths[pod] {
			dead = dead || !d.Before(e.Time())
		}
		if e.Event == "activate" && !dead {
			out = append(out, pod)
		}
	}
	sort.Strings(out)
	return out
}

// podWithMost is the pod whose shards hold the most of `ids`.
func podWithMost(m *shardmap.ShardMap, ids []string) string {
	count := map[string]int{}
	best := ""
	for _, id := range ids {
		o := m.Owners[shardid.Of(id, shardCount)-1]
		count[o]++
		if o != "" && (best == "" || count[o] > count[best]) {
			best = o
		}
	}
	return best
}

// movedIDs are the ids whose shard has another owner in `after` than in `before`.
func movedIDs(before, after *shardmap.ShardMap, ids []string) []string {
	var out []string
	for _, id := range ids {
		s := shardid.Of(id, shardCount) - 1
		if before.Owners[s] != after.Owners[s] {
			out = append(out, id)
		}
	}
	return out
}
