package runner

import (
	"fmt"
	"os"
	"strings"
	"time"

	"kshard.local/e2e/cluster/nodestate"
	"kshard.local/e2e/nemesis/history"
	"kshard.local/e2e/nemesis/schedule"
	"kshard.local/e2e/scenarios/eventlog"
)

// maxShown bounds the violations the report lists (all are counted).
const maxShown = 100

// Checks is what the history checks found.
type Checks struct {
	Counters   int `json:"counters"`
	Acked      int `json:"acknowledgedIncrements"`
	Unknown    int `json:"unknownIncrements"`
	NotApplied int `json:"notAppliedIncrements"`
	// From the event log and containers.jsonl.
	Activations eventlog.Result `json:"activations"`
	AppExits    int             `json:"appExits"`
	Releases    int             `json:"releases"`
	// Counts of violations per check (every one); Violations the first maxShown.
	Counts     map[string]int      `json:"counts"`
	Violations []history.Violation `json:"violations,omitempty"`
}

// Total is the number of violations.
func (c *Checks) Total() int {
	n := 0
	for _, v := range c.Counts {
		n += v
	}
	return n
}

// add records violations; counts, when not nil, counts them (and more that were not passed).
func (c *Checks) add(vs []history.Violation, counts map[string]int) {
	for _, v := range vs {
		if len(c.Violations) < maxShown {
			c.Violations = append(c.Violations, v)
		}
		if counts == nil {
			c.Counts[v.Check]++
		}
	}
	for check, n := range counts {
		c.Counts[check] += n
	}
}

// check runs the three checks over the whole run and records them in the report.
func (r *run) check(finals map[string]int64, unread []string) {
	ops := r.rec.Ops()
	c := &Checks{Counts: map[string]int{}}
	r.rep.Checks = c
	for _, t := range history.Tallies(ops) {
		c.Counters++
		c.Acked += t.Acked
		c.Unknown += t.Unknown
		c.NotApplied += t.NotApplied
	}
	if len(unread) > 0 {
		r.rep.problem("%d counters could not be read at the end within %s (e.g. %v)", len(unread), finalReadTime, head(unread, 5))
	}
	c.add(history.CheckFinal(ops, finals), nil)
	c.add(history.CheckOrder(ops, 3))
	r.checkActivations(c)
	for _, e := range r.maps.Errors() {
		c.add([]history.Violation{{Check: "shardmap", Text: "a ShardMap status that cannot be (one shard, two owners): " + e}}, nil)
	}
	logf("checks: %d counters, %d acknowledged increments, %d unknown, %d not applied; %d violations %v",
		c.Counters, c.Acked, c.Unknown, c.NotApplied, c.Total(), c.Counts)
}

// checkActivations reads the counter's event log and the node's container log and checks
// that no counter of this run was active on two pods at once.
func (r *run) checkActivations(c *Checks) {
	f, err := os.Open(r.cfg.EventLog)
	if err != nil {
		r.rep.problem("the counter's event log: %v", err)
		return
	}
	events, bad, err := eventlog.Parse(f)
	f.Close()
	if err != nil {
		r.rep.problem("reading %s: %v", r.cfg.EventLog, err)
		return
	}
	containers, err := r.node.ContainerEvents()
	if err != nil {
		r.rep.problem("reading the node's containers.jsonl: %v", err)
		return
	}
	r.requireExits(containers)
	deaths := history.Deaths(containers, r.cfg.CounterNS, appContainer, r.releases)
	prefix := r.runID + "-"
	// The singletons (spec.singletons, "singleton-{name}" in the log) too, of the pods this run's
	// ShardMap watch saw: the log outlives clusters, whose pods left their intervals open.
	events = history.SingletonsOf(events, r.seenPods())
	res, vs := history.CheckActivations(events, deaths, func(counter string) bool {
		return strings.HasPrefix(counter, prefix) || strings.HasPrefix(counter, history.SingletonPrefix)
	})
	res.BadLines = bad
	c.Activations = res
	c.add(vs, nil)
	for _, ts := range history.Deaths(containers, r.cfg.CounterNS, appContainer, nil) {
		c.AppExits += len(ts)
	}
	for _, ts := range r.releases {
		c.Releases += len(ts)
	}
	if res.Events == 0 {
		r.rep.problem("the event log %s has no event of this run's counters (prefix %s): the overlap check saw nothing", r.cfg.EventLog, prefix)
	}
}

// exitSeenWithin is how long after a kill the node's recorder has surely logged the process's
// exit: containerd publishes it when the shim reaps the process, a moment after the signal (the
// kill's "heal").
const exitSeenWithin = 10 * time.Second

// requireExits makes sure containers.jsonl has what the overlap check relies on: the exit of
// the app container of every pod whose app a fault killed, after the kill. Without it, an
// activation could look open or closed for the wrong reason.
func (r *run) requireExits(containers []nodestate.ContainerEvent) {
	for _, f := range r.rep.Faults {
		if f.Kind != schedule.KillApp || f.Error != "" || f.Target == "" {
			continue
		}
		found := false
		for _, e := range containers {
			at := time.UnixMicro(e.TsUs)
			if e.Event == nodestate.EventExit && e.Pod == f.Target && e.Container == appContainer &&
				!at.Before(f.Injected) && !at.After(f.Healed.Add(exitSeenWithin)) {
				found = true
				break
			}
		}
		if !found {
			r.rep.problem("containers.jsonl has no exit of the app container of %s between %s and %s, though the nemesis killed it then",
				f.Target, clock(f.Injected), clock(f.Healed.Add(exitSeenWithin)))
		}
	}
}

// attribution names the faults whose window (injection to recovery, widened by a margin)
// holds t; "none" if none does.
func attribution(faults []*FaultRecord, t time.Time) []*FaultRecord {
	var out []*FaultRecord
	for _, f := range faults {
		from, to := window(f)
		if !from.IsZero() && !t.Before(from.Add(-2*time.Second)) && !t.After(to.Add(10*time.Second)) {
			out = append(out, f)
		}
	}
	return out
}

// window is when a fault was injected until service recovered (or, when it did not, until the
// recovery deadline after its heal).
func window(f *FaultRecord) (time.Time, time.Time) {
	if f.Injected.IsZero() {
		return time.Time{}, time.Time{}
	}
	switch {
	case !f.Recovered.IsZero():
		return f.Injected, f.Recovered
	case !f.Healed.IsZero():
		return f.Injected, f.Healed.Add(recoveryDeadline)
	}
	return f.Injected, f.Injected.Add(recoveryDeadline)
}

func describeFaults(fs []*FaultRecord) string {
	if len(fs) == 0 {
		return "no fault"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("step %d %s on %s", f.Step, f.Kind, f.Target)
	}
	return strings.Join(parts, ", ")
}

// seenPods: every pod registered in a version of the ShardMap the run's watch saw.
func (r *run) seenPods() map[string]bool {
	out := map[string]bool{}
	for _, snap := range r.maps.History().Between(time.Time{}, time.Now()) {
		for _, p := range snap.Map.Registered() {
			out[p] = true
		}
	}
	return out
}
