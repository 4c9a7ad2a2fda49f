package schedule

import (
	"reflect"
	"testing"
	"time"
)

func TestTheSameSeedGivesTheSameSchedule(t *testing.T) {
	a, b := Generate(42, 5*time.Minute), Generate(42, 5*time.Minute)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two schedules of seed 42 differ:\n%s\n%s", a, b)
	}
	if a.String() != b.String() {
		t.Fatal("their descriptions differ")
	}
	if c := Generate(43, 5*time.Minute); reflect.DeepEqual(a.Steps, c.Steps) {
		t.Fatal("seeds 42 and 43 gave the same steps")
	}
}

func TestALongerRunExtendsTheSchedule(t *testing.T) {
	short, long := Generate(7, 5*time.Minute), Generate(7, 30*time.Minute)
	if len(long.Steps) <= len(short.Steps) {
		t.Fatalf("30 minutes: %d steps, 5 minutes: %d", len(long.Steps), len(short.Steps))
	}
	if !reflect.DeepEqual(short.Steps, long.Steps[:len(short.Steps)]) {
		t.Fatal("the 5-minute schedule is not the beginning of the 30-minute one")
	}
}

func TestStepsOverlapOnlyPodFaultsAndStayInTheirRanges(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		s := Generate(seed, 30*time.Minute)
		for i, st := range s.Steps {
			if len(st.Faults) == 0 || len(st.Faults) > 2 {
				t.Fatalf("seed %d step %d has %d faults", seed, i, len(st.Faults))
			}
			if len(st.Faults) == 2 && (!st.Faults[0].Kind.PodFault() || !st.Faults[1].Kind.PodFault()) {
				t.Fatalf("seed %d step %d overlaps a cluster fault: %v", seed, i, st.Faults)
			}
			if st.Faults[0].Offset != 0 {
				t.Fatalf("seed %d step %d: the first fault starts at %s", seed, i, st.Faults[0].Offset)
			}
			if st.Gap < 3*time.Second || st.Gap > 15*time.Second {
				t.Fatalf("seed %d step %d: gap %s", seed, i, st.Gap)
			}
			for _, f := range st.Faults {
				checkFault(t, seed, i, f)
			}
		}
	}
}

func checkFault(t *testing.T, seed uint64, step int, f Fault) {
	t.Helper()
	h, ok := holds[f.Kind]
	if !ok {
		t.Fatalf("seed %d step %d: unknown kind %q", seed, step, f.Kind)
	}
	if f.Hold < h.min || f.Hold > h.max {
		t.Fatalf("seed %d step %d: %s holds %s, outside %s..%s", seed, step, f.Kind, f.Hold, h.min, h.max)
	}
	if f.Target < 0 || f.Target >= 1000 {
		t.Fatalf("seed %d step %d: target %d", seed, step, f.Target)
	}
	switch f.Kind {
	case ScaleUp:
		if f.Replicas <= BaseReplicas || f.Replicas > BaseReplicas+2 {
			t.Fatalf("seed %d step %d: scale up to %d", seed, step, f.Replicas)
		}
	case ScaleDown:
		if f.Replicas != BaseReplicas-1 {
			t.Fatalf("seed %d step %d: scale down to %d", seed, step, f.Replicas)
		}
	default:
		if f.Replicas != 0 {
			t.Fatalf("seed %d step %d: %s has replicas %d", seed, step, f.Kind, f.Replicas)
		}
	}
}

func TestEveryKindComesUpAndAShortRunMeetsMost(t *testing.T) {
	long := kindsOf(Generate(3, 30*time.Minute))
	for _, k := range Kinds {
		if long[k] == 0 {
			t.Errorf("30 minutes of seed 3 have no %s", k)
		}
	}
	for seed := uint64(1); seed <= 20; seed++ {
		if n := len(kindsOf(Generate(seed, 5*time.Minute))); n < 7 {
			t.Errorf("5 minutes of seed %d meet only %d kinds of fault", seed, n)
		}
	}
}

func kindsOf(s Schedule) map[Kind]int {
	out := map[Kind]int{}
	for _, st := range s.Steps {
		for _, f := range st.Faults {
			out[f.Kind]++
		}
	}
	return out
}

func TestSomeStepsOverlapTwoFaults(t *testing.T) {
	pairs := 0
	for _, st := range Generate(11, 30*time.Minute).Steps {
		if len(st.Faults) == 2 {
			pairs++
		}
	}
	if pairs == 0 {
		t.Fatal("30 minutes of seed 11 have no overlapping faults")
	}
}

func TestTheDescriptionNamesEveryStep(t *testing.T) {
	s := Schedule{Seed: 9, Duration: time.Minute, Steps: []Step{
		{Faults: []Fault{{Kind: FreezeApp, Target: 412, Hold: 7300 * time.Millisecond},
			{Kind: KillSidecar, Target: 5, Offset: 2 * time.Second}}, Gap: 4 * time.Second},
		{Faults: []Fault{{Kind: ScaleUp, Replicas: 5, Hold: time.Second}}, Gap: 3 * time.Second},
	}}
	want := "schedule of seed 9 for 1m0s: 2 steps\n" +
		"    1. freeze-app of pod #412 for 7.3s + kill-sidecar of pod #5 (starting 2s into the step); then 4s\n" +
		"    2. scale-up to 5 replicas for 1s; then 3s\n"
	if got := s.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
