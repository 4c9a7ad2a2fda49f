package eventlog

import (
	"testing"
	"time"
)

func TestMostActiveCountsOverlappingActivationsPerPod(t *testing.T) {
	events := []Event{
		ev(10, "activate", "a", "p1", 0), ev(20, "activate", "b", "p1", 0),
		ev(30, "stop", "a", "p1", 1), ev(30, "activate", "c", "p1", 0), // a stop, then c at once
		ev(40, "activate", "d", "p1", 0), ev(15, "activate", "x", "p2", 0),
	}
	got := MostActive(events, nil, time.UnixMicro(0), time.UnixMicro(100))
	if got["p1"].Active != 3 || !got["p1"].At.Equal(time.UnixMicro(40)) {
		t.Fatalf("p1: %+v, want 3 at 40 µs (a's stop comes before c's activation)", got["p1"])
	}
	if got["p2"].Active != 1 {
		t.Fatalf("p2: %+v", got["p2"])
	}
}

func TestMostActiveCountsFromTheWindowAndEndsAtADeath(t *testing.T) {
	events := []Event{
		ev(10, "activate", "a", "p1", 0), ev(11, "activate", "b", "p1", 0),
		ev(12, "stop", "b", "p1", 1), ev(50, "activate", "c", "p1", 0),
		ev(60, "activate", "d", "p1", 0),
	}
	deaths := map[string][]time.Time{"p1": {time.UnixMicro(55)}}
	// At 20 µs only a runs; a's interval ends with the death at 55, before d.
	if got := MostActive(events, deaths, time.UnixMicro(20), time.UnixMicro(20)); got["p1"].Active != 1 {
		t.Fatalf("at 20 µs: %+v, want 1", got["p1"])
	}
	if got := MostActive(events, deaths, time.UnixMicro(20), time.UnixMicro(100)); got["p1"].Active != 2 {
		t.Fatalf("20..100 µs: %+v, want 2 (a and c until the death, then d)", got["p1"])
	}
}
