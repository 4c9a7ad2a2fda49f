// Package eventlog checks the counter example's shared event log (examples/counter: one JSON line
// per activation and stop of a counter, with the pod and a wall-clock timestamp) for kshard's
// promise: no entity is ever active on two pods at overlapping times.
//
// An entity is active on a pod from its "activate" to its "stop". A pod whose processes were
// killed writes no stop: its open intervals end at the death time the scenario recorded. An
// interval still open at the end of the log ends with the log.
package eventlog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

// Event is one line of the log.
type Event struct {
	TsUs   int64  `json:"ts_us"`
	Event  string `json:"event"`
	Entity string `json:"entity"`
	Pod    string `json:"pod"`
	Shard  string `json:"shard"`
	Epoch  int64  `json:"epoch"`
	Value  int64  `json:"value"`
}

// Time of the event.
func (e Event) Time() time.Time { return time.UnixMicro(e.TsUs) }

// Parse reads the log's activations and stops; lines that are not events are counted, not fatal.
// A publication the counter received ("event":"topic", no entity) is no entity's: skipped.
func Parse(r io.Reader) (events []Event, bad int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		parsed := json.Unmarshal(sc.Bytes(), &e) == nil
		if parsed && e.Event == "topic" {
			continue
		}
		if !parsed || e.Entity == "" || e.Pod == "" || (e.Event != "activate" && e.Event != "stop") {
			bad++
			continue
		}
		events = append(events, e)
	}
	return events, bad, sc.Err()
}

// Interval is one activation of an entity on a pod.
type Interval struct {
	Pod        string
	Start, End time.Time
	// EndedBy is "stop", "death" (the pod's processes were killed) or "open" (still active when
	// the log ends).
	EndedBy  string
	StartVal int64
	EndVal   int64
	Epoch    int64
}

// Result of a check.
type Result struct {
	Events       int `json:"events"`
	BadLines     int `json:"badLines"`
	Entities     int `json:"entities"`
	Activations  int `json:"activations"`
	Stops        int `json:"stops"`
	ClosedByKill int `json:"closedByDeath"`
	StillOpen    int `json:"openAtEnd"`
	// Handoffs: activations that followed an interval on another pod ended by a stop.
	Handoffs int `json:"handoffs"`
	// Overlaps: pairs of intervals of one entity on two pods that overlap in time. Must be empty.
	Overlaps []string `json:"overlaps,omitempty"`
	// ValueGaps: an activation that loaded another value than the previous owner's stop saved
	// (an acknowledged write lost, or written outside an interval). Must be empty.
	ValueGaps []string `json:"valueGaps,omitempty"`
	// Anomalies: a stop without an activation, or a second activation on a pod without a stop
	// or death in between.
	Anomalies []string `json:"anomalies,omitempty"`
	// Findings: every overlap, value gap and anomaly above, with its entity and time.
	Findings []Finding `json:"-"`
}

// Finding is one overlap, value gap or anomaly: of which entity, when (the start of the second
// activation; the event of an anomaly), and the sentence of Overlaps, ValueGaps or Anomalies.
type Finding struct {
	Kind   string // "overlap", "value-gap" or "anomaly"
	Entity string
	At     time.Time
	Text   string
}

func (r *Result) anomaly(id string, at time.Time, text string) {
	r.Anomalies = append(r.Anomalies, text)
	r.Findings = append(r.Findings, Finding{"anomaly", id, at, text})
}

// Check builds every entity's intervals and looks for overlaps. deaths maps a pod name to the
// times its processes were killed (each closes the pod's intervals open at that moment).
func Check(events []Event, deaths map[string][]time.Time) Result {
	res := Result{Events: len(events)}
	sort.SliceStable(events, func(i, j int) bool { return events[i].TsUs < events[j].TsUs })
	byEntity := map[string][]Event{}
	for _, e := range events {
		byEntity[e.Entity] = append(byEntity[e.Entity], e)
	}
	res.Entities = len(byEntity)
	ids := make([]string, 0, len(byEntity))
	for id := range byEntity {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		intervals := buildIntervals(id, byEntity[id], deaths, &res)
		checkOverlaps(id, intervals, &res)
	}
	return res
}

func buildIntervals(id string, events []Event, deaths map[string][]time.Time, res *Result) []Interval {
	var out []Interval
	open := map[string]*Interval{}
	closeByDeaths := func(pod string, before time.Time) {
		iv := open[pod]
		if iv == nil {
			return
		}
		for _, d := range deaths[pod] {
			if !d.Before(iv.Start) && d.Before(before) {
				iv.End, iv.EndedBy, iv.EndVal = d, "death", -1
				res.ClosedByKill++
				out = append(out, *iv)
				delete(open, pod)
				return
			}
		}
	}
	for _, e := range events {
		t := e.Time()
		closeByDeaths(e.Pod, t)
		switch e.Event {
		case "activate":
			res.Activations++
			if iv := open[e.Pod]; iv != nil {
				res.anomaly(id, t, fmt.Sprintf("%s: activated again on %s at %s without a stop since %s",
					id, e.Pod, stamp(t), stamp(iv.Start)))
				iv.End, iv.EndedBy, iv.EndVal = t, "stop", -1
				out = append(out, *iv)
			}
			open[e.Pod] = &Interval{Pod: e.Pod, Start: t, StartVal: e.Value, Epoch: e.Epoch}
		case "stop":
			res.Stops++
			iv := open[e.Pod]
			if iv == nil {
				res.anomaly(id, t, fmt.Sprintf("%s: stopped on %s at %s without an activation", id, e.Pod, stamp(t)))
				continue
			}
			iv.End, iv.EndedBy, iv.EndVal = t, "stop", e.Value
			out = append(out, *iv)
			delete(open, e.Pod)
		}
	}
	far := time.Unix(1<<40, 0)
	pods := make([]string, 0, len(open))
	for pod := range open {
		pods = append(pods, pod)
	}
	sort.Strings(pods)
	for _, pod := range pods {
		closeByDeaths(pod, far)
		if iv := open[pod]; iv != nil {
			iv.End, iv.EndedBy = far, "open"
			res.StillOpen++
			out = append(out, *iv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

func checkOverlaps(id string, ivs []Interval, res *Result) {
	for i := 1; i < len(ivs); i++ {
		prev, cur := ivs[i-1], ivs[i]
		if prev.Pod != cur.Pod && prev.EndedBy == "stop" {
			res.Handoffs++
			if prev.EndVal != cur.StartVal {
				text := fmt.Sprintf("%s: stopped on %s with %d at %s, activated on %s with %d at %s",
					id, prev.Pod, prev.EndVal, stamp(prev.End), cur.Pod, cur.StartVal, stamp(cur.Start))
				res.ValueGaps = append(res.ValueGaps, text)
				res.Findings = append(res.Findings, Finding{"value-gap", id, cur.Start, text})
			}
		}
		for j := 0; j < i; j++ {
			other := ivs[j]
			if other.Pod != cur.Pod && other.End.After(cur.Start) {
				text := fmt.Sprintf("%s: active on %s %s..%s (%s) and on %s from %s (epoch %d)",
					id, other.Pod, stamp(other.Start), endStamp(other), other.EndedBy, cur.Pod, stamp(cur.Start), cur.Epoch)
				res.Overlaps = append(res.Overlaps, text)
				res.Findings = append(res.Findings, Finding{"overlap", id, cur.Start, text})
			}
		}
	}
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

func endStamp(iv Interval) string {
	if iv.EndedBy == "open" {
		return "end"
	}
	return stamp(iv.End)
}
