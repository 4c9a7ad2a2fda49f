package history

import (
	"strings"
	"testing"
	"time"

	"kshard.local/e2e/cluster/nodestate"
	"kshard.local/e2e/scenarios/eventlog"
)

func event(s float64, kind, counter, pod string, value int64) eventlog.Event {
	return eventlog.Event{TsUs: at(s).UnixMicro(), Event: kind, Entity: counter, Pod: pod, Value: value}
}

func exit(s float64, pod, container string) nodestate.ContainerEvent {
	return nodestate.ContainerEvent{TsUs: at(s).UnixMicro(), Event: nodestate.EventExit, Namespace: "demo",
		Pod: pod, UID: "uid-" + pod, Container: container}
}

func all(string) bool { return true }

func activations(events []eventlog.Event, containers []nodestate.ContainerEvent, releases map[string][]time.Time) []Violation {
	_, vs := CheckActivations(events, Deaths(containers, "demo", "app", releases), all)
	return vs
}

func TestAHandoffByStopPasses(t *testing.T) {
	vs := activations([]eventlog.Event{
		event(1, "activate", "a", "p1", 0), event(5, "stop", "a", "p1", 3), event(6, "activate", "a", "p2", 3),
	}, nil, nil)
	if len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAResetEndsEveryActivationOfThePod(t *testing.T) {
	// The reset of a restarted sidecar logs a stop (with no shard) per counter the app held.
	vs := activations([]eventlog.Event{
		event(1, "activate", "a", "p1", 0), event(2, "activate", "b", "p1", 0),
		event(5, "stop", "a", "p1", 2), event(5, "stop", "b", "p1", 1),
		event(7, "activate", "a", "p2", 2), event(8, "activate", "b", "p2", 1),
	}, []nodestate.ContainerEvent{exit(4, "p1", "kshard-sidecar")}, nil)
	if len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}

func TestTheAppContainersExitEndsItsActivations(t *testing.T) {
	events := []eventlog.Event{event(1, "activate", "a", "p1", 0), event(6, "activate", "a", "p2", 4)}
	if vs := activations(events, []nodestate.ContainerEvent{exit(5, "p1", "app")}, nil); len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
	// After the exit the restarted app activates counters afresh.
	restarted := append(events, event(7, "stop", "a", "p2", 4), event(8, "activate", "a", "p1", 4))
	if vs := activations(restarted, []nodestate.ContainerEvent{exit(5, "p1", "app")}, nil); len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}

func TestTheSidecarsExitDoesNotEndTheAppsActivations(t *testing.T) {
	vs := activations([]eventlog.Event{event(1, "activate", "a", "p1", 0), event(6, "activate", "a", "p2", 0)},
		[]nodestate.ContainerEvent{exit(5, "p1", "kshard-sidecar")}, nil)
	if checks(vs) != "overlap a" || !vs[0].At.Equal(at(6)) || !strings.Contains(vs[0].Text, "p1") {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAnExitOfAnotherNamespacesPodEndsNothing(t *testing.T) {
	other := exit(5, "p1", "app")
	other.Namespace = "elsewhere"
	vs := activations([]eventlog.Event{event(1, "activate", "a", "p1", 0), event(6, "activate", "a", "p2", 0)},
		[]nodestate.ContainerEvent{other}, nil)
	if checks(vs) != "overlap a" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAReleasedOrphansActivationsEndAtTheRelease(t *testing.T) {
	events := []eventlog.Event{event(1, "activate", "a", "p1", 0), event(20, "activate", "a", "p2", 0)}
	if vs := activations(events, nil, map[string][]time.Time{"p1": {at(19)}}); len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
	// Released after the new owner activated it: the orphan still held it.
	if vs := activations(events, nil, map[string][]time.Time{"p1": {at(21)}}); checks(vs) != "overlap a" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAnActivationNeverEndedOverlapsTheNextOwner(t *testing.T) {
	vs := activations([]eventlog.Event{
		event(1, "activate", "a", "p1", 0), event(2, "activate", "a", "p2", 0), event(3, "stop", "a", "p2", 1),
	}, nil, nil)
	if len(vs) == 0 || vs[len(vs)-1].Check != "overlap" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAValueLostBetweenStopAndActivationFails(t *testing.T) {
	vs := activations([]eventlog.Event{
		event(1, "activate", "a", "p1", 0), event(5, "stop", "a", "p1", 3), event(6, "activate", "a", "p2", 2),
	}, nil, nil)
	if checks(vs) != "value-gap a" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestImpossibleSequencesFail(t *testing.T) {
	vs := activations([]eventlog.Event{
		event(1, "stop", "a", "p1", 0),
		event(2, "activate", "b", "p1", 0), event(3, "activate", "b", "p1", 0),
	}, nil, nil)
	if checks(vs) != "anomaly a, anomaly b" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestOnlyTheRunsCountersAreChecked(t *testing.T) {
	events := []eventlog.Event{event(1, "activate", "old-a", "p1", 0), event(2, "activate", "old-a", "p2", 0),
		event(1, "activate", "run-a", "p1", 0)}
	res, vs := CheckActivations(events, nil, func(c string) bool { return strings.HasPrefix(c, "run-") })
	if len(vs) != 0 || res.Entities != 1 {
		t.Fatalf("entities %d, violations %+v", res.Entities, vs)
	}
}

func TestSingletonsOfKeepsOnlyTheSeenPodsSingletons(t *testing.T) {
	events := []eventlog.Event{event(1, "activate", "run-a", "old", 0), event(2, "activate", "singleton-ticker", "old", 0),
		event(3, "activate", "singleton-ticker", "p1", 0)}
	got := SingletonsOf(events, map[string]bool{"p1": true})
	if len(got) != 2 || got[0].Entity != "run-a" || got[1].Pod != "p1" {
		t.Fatalf("kept %v: want the counter's event and p1's singleton", got)
	}
}
