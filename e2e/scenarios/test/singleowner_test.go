package scenariotest

import (
	"fmt"
	"os"
	"strings"
	"time"

	"kshard.local/e2e/scenarios/eventlog"
	"kshard.local/e2e/scenarios/load"
)

// scenarioSingleOwner (14): over the whole run, from the counter's shared event log, no counter
// (nor singleton) was ever active on two pods at overlapping times and no stop → activation lost
// a value; every counter read at the end lies within what its driver knows (no acknowledged
// increment lost); and no version of the ShardMap gave one shard to two pods.
func scenarioSingleOwner(c sc, s *suite) {
	if s.driver != nil {
		s.driver.Stop()
	}
	// Every request of the run, also those between the scenarios' windows (settling, setup).
	whole := s.window(c, s.started, time.Now(), continuousDriver, trafficDriver, skewedDriver)
	c.r.figure("failed requests over the whole run", fmt.Sprintf("%d of %d", whole.Failed, whole.Sent))
	all := append(append(append([]*load.Entity(nil), s.continuous...), s.traffic...), s.skewed...)
	readErrs := load.ReadAll(s.client, s.pods, all, 16, time.Now().Add(3*time.Minute))
	for _, err := range head(errorStrings(readErrs), 10) {
		c.errorf("final read: %s", err)
	}
	var violations []string
	var acked, failed, applied int64
	for _, e := range all {
		violations = append(violations, e.Violations...)
		acked += e.Acked
		failed += e.Failed
		applied += e.Applied
	}
	c.r.figure("acknowledged increments", acked)
	c.r.figure("failed increments (outcome unknown to the driver)", failed)
	c.r.figure("of which proven applied afterwards", applied)
	c.r.figure("acknowledged increments lost or duplicated", len(violations))
	if len(violations) > 0 {
		c.errorf("%d replies or final values contradict a single, lossless owner: %s", len(violations), strings.Join(head(violations, 10), "; "))
	}

	events, bad, err := s.readEventLog()
	if err != nil {
		c.fatalf("%v", err)
	}
	// Only this run's counters (the log and the counters' state outlive runs), and the
	// singletons of this installation's pods.
	var mine []eventlog.Event
	for _, e := range events {
		if strings.HasPrefix(e.Entity, s.runID+"-") {
			mine = append(mine, e)
		}
	}
	mine = append(mine, s.singletonEvents(c)...)
	res := eventlog.Check(mine, s.deathTimes())
	res.BadLines = bad
	c.r.figure("activations / stops / handoffs", fmt.Sprintf("%d / %d / %d", res.Activations, res.Stops, res.Handoffs))
	c.r.figure("counters in the log", res.Entities)
	c.r.figure("intervals ended by a kill", res.ClosedByKill)
	c.r.figure("overlapping activations (two owners)", len(res.Overlaps))
	c.r.figure("values lost in a handoff", len(res.ValueGaps))
	if len(mine) == 0 {
		c.errorf("the event log %s has no event of this run's counters (prefix %s)", s.cfg.eventLog, s.runID)
	}
	if len(res.Overlaps) > 0 {
		c.errorf("%d times a counter was active on two pods at once: %s", len(res.Overlaps), strings.Join(head(res.Overlaps, 10), "; "))
	}
	if len(res.ValueGaps) > 0 {
		c.errorf("%d handoffs lost a value: %s", len(res.ValueGaps), strings.Join(head(res.ValueGaps, 10), "; "))
	}
	if len(res.Anomalies) > 0 {
		c.errorf("%d inconsistent event sequences: %s", len(res.Anomalies), strings.Join(head(res.Anomalies, 10), "; "))
	}
	if errs := s.maps.Errors(); len(errs) > 0 {
		c.errorf("%d versions of the ShardMap were inconsistent: %s", len(errs), strings.Join(head(errs, 10), "; "))
	}
}

func errorStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// readEventLog parses the counter's event log: its events, and the lines that are none.
func (s *suite) readEventLog() ([]eventlog.Event, int, error) {
	f, err := os.Open(s.cfg.eventLog)
	if err != nil {
		return nil, 0, fmt.Errorf("the counter's event log: %w", err)
	}
	defer f.Close()
	events, bad, err := eventlog.Parse(f)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", s.cfg.eventLog, err)
	}
	return events, bad, nil
}
