package scenariotest

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kshard.local/e2e/scenarios/eventlog"
	"kshard.local/e2e/scenarios/shardid"
	"kshard.local/e2e/scenarios/shardmap"
)

const (
	// The counter's singleton (examples/counter/k8s/counter.yaml, spec.singletons): its app
	// writes its start and stop to the event log as the entity singletonPrefix + name.
	tickerName      = "ticker"
	singletonPrefix = "singleton-"
	// How long after its pod is gone the ticker must run again elsewhere: the map's
	// ownershipLease plus this.
	singletonSlack = 30 * time.Second
)

// scenarioSingleton: the counter's ShardMap declares the singleton "ticker". It runs, without
// any message, on the owner of its shard. Under the running load, every process of that pod is
// SIGKILLed and kept dead and the pod object deleted (as in the crash scenario); the ticker must
// then be active on another pod within spec.ownershipLease + 30 s of the pod being gone, and the
// event log must never show it active on two pods at once.
func scenarioSingleton(c sc, s *suite) {
	s.waitSteady(c, 3)
	lease, declared := s.singletonSpec(c)
	if !contains(declared, tickerName) {
		c.fatalf("the counter's ShardMap does not declare the singleton %q (spec.singletons: %v)", tickerName, declared)
	}
	shard := shardid.Of(tickerName, shardCount)
	var victim string
	c.waitUntil(time.Minute, fmt.Sprintf("the ticker runs on the owner of shard %d", shard), func() (bool, string) {
		owner := s.latest().Owners[shard-1]
		on := s.singletonActiveOn(c, tickerName)
		if len(on) == 1 && on[0] == owner && owner != "" {
			victim = owner
			return true, ""
		}
		return false, fmt.Sprintf("shard %d is %q's; the ticker is active on %v", shard, owner, on)
	})
	c.r.figure("ticker's pod (owner of its shard)", fmt.Sprintf("%s (shard %d)", victim, shard))

	t0 := time.Now()
	s.killAndDelete(c, victim)
	gone := time.Now()

	bound := lease + singletonSlack
	var next string
	c.waitUntil(bound, fmt.Sprintf("the ticker is active on another pod than %s (bound: ownershipLease %s + %s)", victim, lease, singletonSlack), func() (bool, string) {
		on := s.singletonActiveOn(c, tickerName)
		if len(on) == 1 && on[0] != victim {
			next = on[0]
			return true, ""
		}
		return false, fmt.Sprintf("active on %v; shard %d is %q's", on, shard, s.latest().Owners[shard-1])
	})
	back := time.Now()
	c.r.figure("ticker moved to", next)
	c.r.figure("kill → pod object deleted", ms(gone.Sub(t0)))
	c.r.figure("pod gone → ticker active again", ms(back.Sub(gone)))
	c.r.figure("kill → ticker active again", ms(back.Sub(t0)))

	res := eventlog.Check(s.singletonEvents(c), s.deathTimes())
	c.r.figure("ticker activations / stops / moves", fmt.Sprintf("%d / %d / %d", res.Activations, res.Stops, res.Handoffs))
	if len(res.Overlaps) > 0 {
		c.errorf("%d times a singleton was active on two pods at once: %s", len(res.Overlaps), strings.Join(head(res.Overlaps, 10), "; "))
	}
	if len(res.Anomalies) > 0 {
		c.errorf("%d inconsistent singleton event sequences: %s", len(res.Anomalies), strings.Join(head(res.Anomalies, 10), "; "))
	}
	// Back to 3 balanced pods: the Deployment replaced the pod.
	s.waitBalancedOver(c, 3, 6*time.Minute)
}

// singletonSpec reads spec.singletons and spec.ownershipLease (default 30s) of the counter's
// ShardMap from the API server.
func (s *suite) singletonSpec(c sc) (time.Duration, []string) {
	ctx, cancel := apiCtx()
	u, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	cancel()
	if err != nil {
		c.fatalf("reading the ShardMap %s/%s: %v", s.cfg.counterNS, s.cfg.counterName, err)
	}
	names, _, err := unstructured.NestedStringSlice(u.Object, "spec", "singletons")
	if err != nil {
		c.fatalf("spec.singletons: %v", err)
	}
	lease := 30 * time.Second
	if text, found, err := unstructured.NestedString(u.Object, "spec", "ownershipLease"); err != nil {
		c.fatalf("spec.ownershipLease: %v", err)
	} else if found {
		if lease, err = time.ParseDuration(text); err != nil {
			c.fatalf("spec.ownershipLease %q: %v", text, err)
		}
	}
	return lease, names
}

// singletonEvents are the singletons' events in the counter's event log written by pods of this
// installation (those the ShardMap watch saw registered): the log outlives clusters, and a pod
// of an earlier one left its singletons' intervals open for good.
func (s *suite) singletonEvents(c sc) []eventlog.Event {
	events, _, err := s.readEventLog()
	if err != nil {
		c.fatalf("%v", err)
	}
	pods := map[string]bool{}
	for _, snap := range s.history().Between(time.Time{}, time.Now()) {
		for _, p := range snap.Map.Registered() {
			pods[p] = true
		}
	}
	return keepSingletonEvents(events, pods)
}

func keepSingletonEvents(events []eventlog.Event, pods map[string]bool) []eventlog.Event {
	var out []eventlog.Event
	for _, e := range events {
		if strings.HasPrefix(e.Entity, singletonPrefix) && pods[e.Pod] {
			out = append(out, e)
		}
	}
	return out
}

// singletonActiveOn lists the pods on which the singleton `name` is active by the event log: its
// last event there is an activation, and no recorded death of the pod came after it.
func (s *suite) singletonActiveOn(c sc, name string) []string {
	return rememberedActiveOn(s.singletonEvents(c), singletonPrefix+name, s.deathTimes())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
