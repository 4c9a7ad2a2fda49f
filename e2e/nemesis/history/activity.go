package history

import (
	"sort"
	"strings"
	"time"

	"kshard.local/e2e/cluster/nodestate"
	"kshard.local/e2e/scenarios/eventlog"
)

// An activation of a counter on a pod begins with its "activate" line in the counter's event log
// and ends with the first of:
//   - a "stop" line of that pod for that counter (a stop call, or the app's reset, which logs a
//     stop for every counter it drops);
//   - the exit of the pod's app container, from the node's containers.jsonl (taken once
//     the container's cgroup is empty, so the process did nothing after it): the in-memory
//     counter died with the process;
//   - the release of a force-deleted pod's processes by the fault tool (which returns once they
//     are gone; containers.jsonl has their exits too).
//
// The exit of the sidecar container ends nothing: the app keeps its counters until it is reset.

// Deaths gathers, per pod name, the times the app container's processes were seen gone: the
// exits of container `app` of pods of namespace ns, and the releases (pod name → times).
func Deaths(containers []nodestate.ContainerEvent, ns, app string, releases map[string][]time.Time) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, e := range containers {
		if e.Event == nodestate.EventExit && e.Namespace == ns && e.Container == app {
			out[e.Pod] = append(out[e.Pod], time.UnixMicro(e.TsUs))
		}
	}
	for pod, ts := range releases {
		out[pod] = append(out[pod], ts...)
	}
	for pod := range out {
		ts := out[pod]
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
	return out
}

// SingletonPrefix starts the event log's entity name of a singleton of the counter's ShardMap
// (examples/counter: "singleton-ticker").
const SingletonPrefix = "singleton-"

// SingletonsOf drops the singletons' events of pods not in `pods` and keeps every other event.
func SingletonsOf(events []eventlog.Event, pods map[string]bool) []eventlog.Event {
	var out []eventlog.Event
	for _, e := range events {
		if !strings.HasPrefix(e.Entity, SingletonPrefix) || pods[e.Pod] {
			out = append(out, e)
		}
	}
	return out
}

// CheckActivations builds every counter's activations from the event log (only the events of
// counters `keep` accepts) and the deaths, and reports as violations the overlaps of two pods'
// activations of one counter, the values lost between a stop and the next activation, and
// sequences the log cannot have (a stop with no activation, two activations on a pod with no end
// in between).
func CheckActivations(events []eventlog.Event, deaths map[string][]time.Time, keep func(counter string) bool) (eventlog.Result, []Violation) {
	var mine []eventlog.Event
	for _, e := range events {
		if keep(e.Entity) {
			mine = append(mine, e)
		}
	}
	res := eventlog.Check(mine, deaths)
	var out []Violation
	for _, f := range res.Findings {
		out = append(out, Violation{Check: f.Kind, Counter: f.Entity, At: f.At, Text: f.Text})
	}
	return res, out
}
