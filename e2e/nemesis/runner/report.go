package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"kshard.local/e2e/nemesis/history"
	"kshard.local/e2e/nemesis/schedule"
	"kshard.local/e2e/scenarios/reportfile"
)

// Report of a run: nemesis.md for people, nemesis.json as data, history.jsonl every operation.
type Report struct {
	Passed        bool           `json:"passed"`
	Seed          uint64         `json:"seed"`
	Duration      string         `json:"duration"`
	Replay        string         `json:"replay"`
	Commit        string         `json:"commit,omitempty"`
	RunID         string         `json:"runID"`
	Started       time.Time      `json:"started"`
	Seconds       float64        `json:"seconds"`
	Settings      []string       `json:"settings"`
	Schedule      string         `json:"schedule"`
	StepsPlanned  int            `json:"stepsPlanned"`
	StepsRun      int            `json:"stepsRun"`
	FaultsStarted time.Time      `json:"faultsStarted"`
	FaultsEnded   time.Time      `json:"faultsEnded"`
	SettledAfter  float64        `json:"settledAfterSeconds"`
	Faults        []*FaultRecord `json:"faults"`
	Kinds         []*KindSummary `json:"kinds"`
	Requests      Requests       `json:"requests"`
	Checks        *Checks        `json:"checks"`
	// Problems of the run itself: waits that failed, faults left behind, logs missing. Any
	// fails the run, as violations do.
	Problems []string `json:"problems,omitempty"`

	mu  sync.Mutex
	ops []history.Op
}

// KindSummary is what the faults of one kind did.
type KindSummary struct {
	Kind    schedule.Kind `json:"kind"`
	Count   int           `json:"count"`
	Skipped int           `json:"skipped"`
	// Requests of the load in flight during the faults' windows (injection → recovery).
	Sent         int            `json:"sent"`
	Failed       int            `json:"failed"`
	FailedByCode map[string]int `json:"failedByCode"`
	// Latency of the answered ones, in milliseconds.
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// Recovery: heal → every shard answering, in seconds.
	RecoveryMedian float64 `json:"recoveryMedianSeconds"`
	RecoveryMax    float64 `json:"recoveryMaxSeconds"`
	NotRecovered   int     `json:"notRecovered"`
	// Violations during the faults' windows: two owners (overlaps, value gaps, anomalies),
	// lost (or excess) increments, values going back (or given twice).
	Overlaps int `json:"overlaps"`
	Lost     int `json:"lost"`
	WentBack int `json:"wentBack"`
}

// Requests sums up the load's requests of the whole run.
type Requests struct {
	Sent   int            `json:"sent"`
	OK     int            `json:"ok"`
	Failed int            `json:"failed"`
	ByCode map[string]int `json:"failedByCode"`
}

func newReport(cfg Config, sched schedule.Schedule) *Report {
	return &Report{Seed: cfg.Seed, Duration: cfg.Duration.String(), Replay: cfg.Replay, Commit: cfg.Commit,
		Started: time.Now(), Schedule: sched.String(), StepsPlanned: len(sched.Steps),
		Settings: []string{
			fmt.Sprintf("counter: %d shards, %d replicas, spec.ownershipLease as in examples/counter/k8s/counter.yaml", shardCount, schedule.BaseReplicas),
			fmt.Sprintf("load: %.0f requests/s over %d counters per shard (%.0f%% reads), each through a random serving pod, at most %d in flight, 30 s client timeout", cfg.Rate, cfg.PerShard, readShare*100, maxInFlight),
			fmt.Sprintf("quiet period after settling: %s", cfg.Quiet),
		}}
}

func (rep *Report) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logf("problem: %s", msg)
	rep.mu.Lock()
	rep.Problems = append(rep.Problems, msg)
	rep.mu.Unlock()
}

// finish sums the run up from its faults, checks and operations.
func (rep *Report) finish(ops []history.Op) {
	rep.ops = ops
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.Requests = Requests{ByCode: map[string]int{}}
	var load []history.Op
	for _, op := range ops {
		if op.Source != "load" {
			continue
		}
		load = append(load, op)
		rep.Requests.Sent++
		if op.Outcome == history.OK {
			rep.Requests.OK++
			continue
		}
		rep.Requests.Failed++
		rep.Requests.ByCode[op.Code]++
	}
	byKind := map[schedule.Kind]*KindSummary{}
	for _, k := range schedule.Kinds {
		byKind[k] = &KindSummary{Kind: k, FailedByCode: map[string]int{}}
	}
	for _, k := range schedule.Kinds {
		summarizeKind(byKind[k], rep.Faults, load)
	}
	if rep.Checks != nil {
		attribute(byKind, rep.Faults, rep.Checks.Violations)
	}
	rep.Kinds = nil
	for _, k := range schedule.Kinds {
		if s := byKind[k]; s.Count+s.Skipped > 0 {
			rep.Kinds = append(rep.Kinds, s)
		}
	}
	rep.Passed = len(rep.Problems) == 0 && rep.Checks != nil && rep.Checks.Total() == 0
}

func summarizeKind(s *KindSummary, faults []*FaultRecord, ops []history.Op) {
	var recoveries, latencies []float64
	counted := map[int]bool{}
	for _, f := range faults {
		if f.Kind != s.Kind {
			continue
		}
		if f.Injected.IsZero() {
			s.Skipped++
			continue
		}
		s.Count++
		if d := f.Recovery(); d >= 0 {
			recoveries = append(recoveries, d.Seconds())
		} else {
			s.NotRecovered++
		}
		from, to := window(f)
		for i, op := range ops {
			if counted[i] || op.Start.After(to) || op.End.Before(from) {
				continue
			}
			counted[i] = true
			s.Sent++
			if op.Outcome != history.OK {
				s.Failed++
				s.FailedByCode[op.Code]++
				continue
			}
			latencies = append(latencies, float64(op.End.Sub(op.Start).Microseconds())/1000)
		}
	}
	sort.Float64s(recoveries)
	if n := len(recoveries); n > 0 {
		s.RecoveryMedian, s.RecoveryMax = recoveries[n/2], recoveries[n-1]
	}
	sort.Float64s(latencies)
	if n := len(latencies); n > 0 {
		s.P99Ms, s.MaxMs = latencies[(n*99)/100], latencies[n-1]
	}
}

// attribute counts each violation against the kinds of the faults around it ("none" is not a
// kind: a violation outside every fault's window shows in the checks only).
func attribute(byKind map[schedule.Kind]*KindSummary, faults []*FaultRecord, vs []history.Violation) {
	for _, v := range vs {
		seen := map[schedule.Kind]bool{}
		for _, f := range attribution(faults, v.At) {
			if seen[f.Kind] {
				continue
			}
			seen[f.Kind] = true
			s := byKind[f.Kind]
			switch v.Check {
			case "overlap", "value-gap", "anomaly":
				s.Overlaps++
			case "lost", "excess":
				s.Lost++
			case "went-back", "duplicate":
				s.WentBack++
			}
		}
	}
}

// Write stores nemesis.md, nemesis.json and history.jsonl in dir.
func (rep *Report) Write(dir string) error {
	if err := reportfile.Write(dir, "nemesis", rep, rep.Markdown()); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	if err := history.WriteJSONL(f, rep.ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Markdown renders the report.
func (rep *Report) Markdown() string {
	var b strings.Builder
	result := "FAILED"
	if rep.Passed {
		result = "PASSED"
	}
	fmt.Fprintf(&b, "# kshard nemesis: %s\n\n", result)
	fmt.Fprintf(&b, "Seed **%d**, schedule for %s: %d of %d steps run", rep.Seed, rep.Duration, rep.StepsRun, rep.StepsPlanned)
	if !rep.FaultsStarted.IsZero() && !rep.FaultsEnded.IsZero() {
		fmt.Fprintf(&b, ", faults from %s to %s (%s)", clock(rep.FaultsStarted), clock(rep.FaultsEnded),
			secs(rep.FaultsEnded.Sub(rep.FaultsStarted)))
	}
	fmt.Fprintf(&b, "; settled %.1f s after the last heal; the whole run took %s", rep.SettledAfter, secs(time.Duration(rep.Seconds*float64(time.Second))))
	if rep.Commit != "" {
		fmt.Fprintf(&b, ", at commit `%s`", rep.Commit)
	}
	fmt.Fprintf(&b, ".  \nReplay: `%s`\n\n", rep.Replay)
	for _, s := range rep.Settings {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	rep.kindTable(&b)
	rep.checksSection(&b)
	rep.faultTable(&b)
	if len(rep.Problems) > 0 {
		b.WriteString("\n## Problems of the run\n\n")
		for _, p := range rep.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	fmt.Fprintf(&b, "\n## The schedule\n\n```text\n%s```\n", rep.Schedule)
	return b.String()
}

func (rep *Report) kindTable(b *strings.Builder) {
	b.WriteString("\n## Per fault kind\n\n")
	b.WriteString("Requests: the load's requests in flight from a fault's injection to the recovery after it. ")
	b.WriteString("Recovery: from the heal (the end of a freeze or partition, the release of a force-deleted pod, ")
	b.WriteString("the API server started, the kill itself, the rollout or scale done; of two overlapping faults, the later heal) ")
	b.WriteString("until a read of every shard has answered.\n\n")
	b.WriteString("| fault | count | failed / requests | failed by code | answered: p99 / max latency | recovery median / max | overlaps | lost | went back |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range rep.Kinds {
		count := fmt.Sprint(s.Count)
		if s.Skipped > 0 {
			count += fmt.Sprintf(" (+%d skipped)", s.Skipped)
		}
		recovery := fmt.Sprintf("%.1f s / %.1f s", s.RecoveryMedian, s.RecoveryMax)
		if s.NotRecovered > 0 {
			recovery += fmt.Sprintf(", %d not within %s", s.NotRecovered, recoveryDeadline)
		}
		fmt.Fprintf(b, "| %s | %s | %d / %d | %s | %.0f / %.0f ms | %s | %d | %d | %d |\n", s.Kind, count, s.Failed, s.Sent,
			codes(s.FailedByCode), s.P99Ms, s.MaxMs, recovery, s.Overlaps, s.Lost, s.WentBack)
	}
	q := rep.Requests
	fmt.Fprintf(b, "\nOver the whole run: %d requests, %d answered, %d failed (%s).\n", q.Sent, q.OK, q.Failed, codes(q.ByCode))
}

func codes(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
