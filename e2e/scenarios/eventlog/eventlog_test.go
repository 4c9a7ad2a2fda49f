package eventlog

import (
	"strings"
	"testing"
	"time"
)

func ev(ts int64, kind, entity, pod string, value int64) Event {
	return Event{TsUs: ts, Event: kind, Entity: entity, Pod: pod, Value: value}
}

func TestParseSkipsBadLines(t *testing.T) {
	log := `{"ts_us":1,"event":"activate","entity":"a","pod":"p1","shard":"3","epoch":2,"value":0}
garbage
{"ts_us":2,"event":"stop","entity":"a","pod":"p1","shard":"3","epoch":2,"value":5}
{"ts_us":3,"event":"other","entity":"a","pod":"p1"}
{"ts_us":4,"event":"topic","topic":"news","pod":"p1","publisher":"p2"}
`
	events, bad, err := Parse(strings.NewReader(log))
	if err != nil || len(events) != 2 || bad != 2 || events[1].Value != 5 {
		t.Fatalf("events %v, bad %d, err %v", events, bad, err)
	}
}

func TestHandoffWithoutOverlapPasses(t *testing.T) {
	r := Check([]Event{
		ev(10, "activate", "a", "p1", 0), ev(20, "stop", "a", "p1", 4),
		ev(21, "activate", "a", "p2", 4), ev(30, "activate", "b", "p1", 0),
	}, nil)
	if len(r.Overlaps) != 0 || len(r.ValueGaps) != 0 || len(r.Anomalies) != 0 || r.Handoffs != 1 || r.StillOpen != 2 {
		t.Fatalf("result %+v", r)
	}
}

func TestOverlapOnTwoPodsIsFound(t *testing.T) {
	r := Check([]Event{
		ev(10, "activate", "a", "p1", 0), ev(15, "activate", "a", "p2", 0), ev(20, "stop", "a", "p1", 3),
	}, nil)
	if len(r.Overlaps) != 1 || !strings.Contains(r.Overlaps[0], "on p1") {
		t.Fatalf("overlaps %v", r.Overlaps)
	}
	// (Its stop's value is not the next activation's either: a value gap too.)
	if f := r.Findings; len(f) != 2 || f[1].Kind != "overlap" || f[1].Entity != "a" || !f[1].At.Equal(time.UnixMicro(15)) {
		t.Fatalf("findings %+v", f)
	}
	// An interval left open (no stop, no death) overlaps every later one on another pod.
	r = Check([]Event{ev(10, "activate", "a", "p1", 0), ev(50, "activate", "a", "p2", 0)}, nil)
	if len(r.Overlaps) != 1 {
		t.Fatalf("overlaps %v", r.Overlaps)
	}
}

func TestDeathClosesTheIntervalsOfAKilledPod(t *testing.T) {
	events := []Event{ev(10, "activate", "a", "p1", 0), ev(50, "activate", "a", "p2", 7)}
	r := Check(events, map[string][]time.Time{"p1": {time.UnixMicro(40)}})
	if len(r.Overlaps) != 0 || r.ClosedByKill != 1 || len(r.ValueGaps) != 0 {
		t.Fatalf("result %+v", r)
	}
	// A death after the other pod's activation does not hide the overlap.
	r = Check(events, map[string][]time.Time{"p1": {time.UnixMicro(60)}})
	if len(r.Overlaps) != 1 {
		t.Fatalf("overlaps %v", r.Overlaps)
	}
}

func TestLostValueAtHandoffIsFound(t *testing.T) {
	r := Check([]Event{
		ev(10, "activate", "a", "p1", 0), ev(20, "stop", "a", "p1", 4), ev(21, "activate", "a", "p2", 3),
	}, nil)
	if len(r.ValueGaps) != 1 {
		t.Fatalf("gaps %v", r.ValueGaps)
	}
}
