package runner

import (
	"strings"
	"testing"
	"time"

	"kshard.local/e2e/nemesis/history"
	"kshard.local/e2e/nemesis/schedule"
)

// at(s) is s seconds into a made-up run.
func at(s int) time.Time { return time.Unix(1764158400+int64(s), 0) }

func loadOp(start, end int, outcome history.Outcome, code string) history.Op {
	return history.Op{Counter: "c", Kind: history.Increment, Start: at(start), End: at(end), Outcome: outcome,
		Code: code, Source: "load"}
}

func sampleReport() *Report {
	rep := newReport(Config{Seed: 42, Duration: 5 * time.Minute, Replay: "make chaos SEED=42 DURATION=5m"},
		schedule.Generate(42, 5*time.Minute))
	rep.Faults = []*FaultRecord{
		{Step: 1, Kind: schedule.FreezeApp, Plan: "freeze-app of pod #3 for 5s", Target: "counter-a",
			Injected: at(10), Healed: at(15), Recovered: at(17), StepHealed: at(15)},
		{Step: 2, Kind: schedule.FreezeApp, Plan: "freeze-app of pod #8 for 5s", Target: "counter-b",
			Injected: at(40), Healed: at(44), Recovered: at(47), StepHealed: at(45), Overlapping: true},
		{Step: 3, Kind: schedule.ForceDelete, Plan: "force-delete of pod #1 for 20s", Target: "counter-c",
			Injected: at(60), Healed: at(80)},
		{Step: 4, Kind: schedule.KillApp, Plan: "kill-app of pod #2", Error: "skipped: no serving counter pod to hit"},
	}
	rep.Checks = &Checks{Counts: map[string]int{}}
	return rep
}

func TestTheReportSumsUpEachKind(t *testing.T) {
	rep := sampleReport()
	rep.finish([]history.Op{
		loadOp(11, 12, history.Unknown, "OutcomeUnknown"), loadOp(12, 13, history.OK, ""),
		loadOp(41, 50, history.Unknown, "ClientTimeout"), loadOp(30, 31, history.NotApplied, "SendTimeout"),
		loadOp(61, 71, history.NotApplied, "SendTimeout"),
		{Counter: "c", Kind: history.Read, Start: at(1), End: at(2), Outcome: history.OK, Source: "final"},
	})
	if !rep.Passed {
		t.Fatalf("a run without violations or problems failed: %v", rep.Problems)
	}
	kinds := map[schedule.Kind]*KindSummary{}
	for _, k := range rep.Kinds {
		kinds[k.Kind] = k
	}
	freeze := kinds[schedule.FreezeApp]
	if freeze.Count != 2 || freeze.Sent != 3 || freeze.Failed != 2 || freeze.FailedByCode["OutcomeUnknown"] != 1 ||
		freeze.RecoveryMax != 2 || freeze.RecoveryMedian != 2 {
		t.Fatalf("freeze-app %+v", freeze)
	}
	if fd := kinds[schedule.ForceDelete]; fd.NotRecovered != 1 || fd.Failed != 1 {
		t.Fatalf("force-delete %+v", fd)
	}
	if kill := kinds[schedule.KillApp]; kill.Count != 0 || kill.Skipped != 1 {
		t.Fatalf("kill-app %+v", kill)
	}
	if rep.Requests.Sent != 5 || rep.Requests.Failed != 4 || rep.Requests.ByCode["SendTimeout"] != 2 {
		t.Fatalf("requests %+v", rep.Requests)
	}
	md := rep.Markdown()
	for _, want := range []string{"# kshard nemesis: PASSED", "Seed **42**", "`make chaos SEED=42 DURATION=5m`",
		"| freeze-app | 2 | 2 / 3 | 1 ClientTimeout, 1 OutcomeUnknown | 1000 / 1000 ms | 2.0 s / 2.0 s | 0 | 0 | 0 |",
		"| kill-app | 0 (+1 skipped) |", "not within 3m0s", "error: skipped"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestViolationsFailTheRunAndCountAgainstTheFaultsAroundThem(t *testing.T) {
	rep := sampleReport()
	rep.Checks.add([]history.Violation{
		{Check: "overlap", Counter: "c1", At: at(70), Text: "c1: active on counter-c and counter-a"},
		{Check: "lost", Counter: "c2", At: at(12), Text: "c2: final value 3 < 4 acknowledged"},
		{Check: "went-back", Counter: "c3", At: at(500), Text: "c3: went back"},
	}, nil)
	rep.finish(nil)
	if rep.Passed {
		t.Fatal("a run with violations passed")
	}
	kinds := map[schedule.Kind]*KindSummary{}
	for _, k := range rep.Kinds {
		kinds[k.Kind] = k
	}
	if fd := kinds[schedule.ForceDelete]; fd.Overlaps != 1 || fd.Lost != 0 {
		t.Fatalf("force-delete %+v", fd)
	}
	if fr := kinds[schedule.FreezeApp]; fr.Lost != 1 || fr.Overlaps != 0 || fr.WentBack != 0 {
		t.Fatalf("freeze-app %+v", fr)
	}
	md := rep.Markdown()
	for _, want := range []string{"# kshard nemesis: FAILED", "**FAILED**: 1 overlap", "**FAILED**: 1 lost",
		"during: step 3 force-delete on counter-c", "c3: went back — during: no fault"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestAProblemOfTheRunFailsIt(t *testing.T) {
	rep := sampleReport()
	rep.problem("the counter did not settle")
	rep.finish(nil)
	if rep.Passed || !strings.Contains(rep.Markdown(), "## Problems of the run\n\n- the counter did not settle") {
		t.Fatalf("passed %v:\n%s", rep.Passed, rep.Markdown())
	}
}
