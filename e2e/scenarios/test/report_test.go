package scenariotest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/reportfile"
	"kshard.local/e2e/support/wait"
)

// Figure is one measured value of a scenario, in the order the scenario measured it.
type Figure struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// ScenarioReport is what one scenario measured and whether it passed.
type ScenarioReport struct {
	Number int    `json:"number"`
	Name   string `json:"name"`
	Title  string `json:"title"`
	// Status: passed, failed or skipped.
	Status  string   `json:"status"`
	Seconds float64  `json:"seconds"`
	Figures []Figure `json:"figures,omitempty"`
	// Requests: the load drivers' requests during the scenario's window, per driver.
	Requests map[string]load.Stats `json:"requests,omitempty"`
	Failures []string              `json:"failures,omitempty"`
	Notes    []string              `json:"notes,omitempty"`

	mu    sync.Mutex
	start time.Time
}

// Report of a whole run.
type Report struct {
	Started   time.Time         `json:"started"`
	Seconds   float64           `json:"seconds"`
	Command   string            `json:"command"`
	Commit    string            `json:"commit,omitempty"`
	Settings  []Figure          `json:"settings"`
	Scenarios []*ScenarioReport `json:"scenarios"`
	Passed    int               `json:"passed"`
	Failed    int               `json:"failed"`
	Skipped   int               `json:"skipped"`
}

func (r *ScenarioReport) figure(name string, value any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.Figures {
		if r.Figures[i].Name == name {
			r.Figures[i].Value = value
			return
		}
	}
	r.Figures = append(r.Figures, Figure{name, value})
}

func (r *ScenarioReport) note(format string, args ...any) {
	r.mu.Lock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *ScenarioReport) failure(msg string) {
	r.mu.Lock()
	r.Failures = append(r.Failures, msg)
	r.mu.Unlock()
}

func (r *ScenarioReport) requests(driver string, s load.Stats) {
	r.mu.Lock()
	if r.Requests == nil {
		r.Requests = map[string]load.Stats{}
	}
	r.Requests[driver] = s
	r.mu.Unlock()
}

// failedRequests sums failures over the drivers.
func (r *ScenarioReport) failedRequests() (failed, sent int) {
	for _, s := range r.Requests {
		failed += s.Failed
		sent += s.Sent
	}
	return failed, sent
}

// sc is a running scenario: its testing.T and its report. Failures go to both.
type sc struct {
	*testing.T
	r *ScenarioReport
}

func (c sc) errorf(format string, args ...any) {
	c.Helper()
	msg := fmt.Sprintf(format, args...)
	c.r.failure(msg)
	c.Error(msg)
}

func (c sc) fatalf(format string, args ...any) {
	c.Helper()
	msg := fmt.Sprintf(format, args...)
	c.r.failure(msg)
	c.Fatal(msg)
}

func (c sc) logf(format string, args ...any) {
	c.Helper()
	c.Logf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// waitUntil polls cond every 200 ms until it holds and returns how long that took; after
// timeout it fails the scenario with what did not happen and what cond said last.
func (c sc) waitUntil(timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	c.Helper()
	d, err := wait.Until(timeout, 200*time.Millisecond, cond)
	if err != nil {
		c.fatalf("%s: %v", what, err)
	}
	return d
}

func (rep *Report) finish(now time.Time) {
	rep.Seconds = round(now.Sub(rep.Started).Seconds(), 1)
	rep.Passed, rep.Failed, rep.Skipped = 0, 0, 0
	for _, s := range rep.Scenarios {
		switch s.Status {
		case "passed":
			rep.Passed++
		case "failed":
			rep.Failed++
		default:
			rep.Skipped++
		}
	}
}

// write stores the report as scenarios.json and scenarios.md in dir.
func (rep *Report) write(dir string) error {
	return reportfile.Write(dir, "scenarios", rep, rep.markdown())
}

// markdown renders the report for people (and for docs/reliability.md).
func (rep *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# kshard end-to-end scenarios\n\n")
	fmt.Fprintf(&b, "Run %s, %s, %d passed, %d failed, %d skipped.  \n",
		rep.Started.Format("2006-01-02 15:04:05 MST"), formatSeconds(rep.Seconds), rep.Passed, rep.Failed, rep.Skipped)
	fmt.Fprintf(&b, "Command: `%s`", rep.Command)
	if rep.Commit != "" {
		fmt.Fprintf(&b, " at commit `%s`", rep.Commit)
	}
	b.WriteString(".\n\n")
	if len(rep.Settings) > 0 {
		b.WriteString("Settings: ")
		var parts []string
		for _, f := range rep.Settings {
			parts = append(parts, fmt.Sprintf("%s %v", f.Name, formatValue(f.Value)))
		}
		b.WriteString(strings.Join(parts, "; ") + ".\n\n")
	}
	b.WriteString("| # | scenario | result | failed / sent requests | key figures |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, s := range rep.Scenarios {
		failed, sent := s.failedRequests()
		reqs := "—"
		if sent > 0 {
			reqs = fmt.Sprintf("%d / %d", failed, sent)
		}
		var figs []string
		for i, f := range s.Figures {
			if i == 4 {
				figs = append(figs, "…")
				break
			}
			figs = append(figs, fmt.Sprintf("%s: %s", f.Name, formatValue(f.Value)))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", s.Number, s.Title, strings.ToUpper(s.Status), reqs,
			strings.Join(figs, "; "))
	}
	for _, s := range rep.Scenarios {
		fmt.Fprintf(&b, "\n## %d. %s: %s (%s)\n\n", s.Number, s.Title, s.Status, formatSeconds(s.Seconds))
		for _, f := range s.Figures {
			fmt.Fprintf(&b, "- %s: %s\n", f.Name, formatValue(f.Value))
		}
		drivers := make([]string, 0, len(s.Requests))
		for d := range s.Requests {
			drivers = append(drivers, d)
		}
		sort.Strings(drivers)
		for _, d := range drivers {
			st := s.Requests[d]
			fmt.Fprintf(&b, "- requests of driver `%s`: %d sent, %d acknowledged, %d failed, %d rerouted attempts, %.0f/s, latency p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
				d, st.Sent, st.Acked, st.Failed, st.Rerouted, st.RatePerSecond, st.P50, st.P99, st.Max)
			reasons := make([]string, 0, len(st.FailReasons))
			for reason, n := range st.FailReasons {
				reasons = append(reasons, fmt.Sprintf("%d × %s", n, reason))
			}
			sort.Strings(reasons)
			if len(reasons) > 0 {
				fmt.Fprintf(&b, "  - failures: %s\n", strings.Join(reasons, ", "))
			}
			for _, f := range st.FirstFailures {
				fmt.Fprintf(&b, "  - %s\n", f)
			}
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
		for _, f := range s.Failures {
			fmt.Fprintf(&b, "- **failure**: %s\n", f)
		}
	}
	return b.String()
}

func formatValue(v any) string {
	switch x := v.(type) {
	case time.Duration:
		return x.Round(time.Millisecond).String()
	case float64:
		return fmt.Sprintf("%.3g", x)
	case []string:
		return strings.Join(x, ", ")
	}
	return fmt.Sprint(v)
}

func formatSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond)
	return d.String()
}

func round(x float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	if x < 0 {
		return -round(-x, digits)
	}
	return float64(int64(x*p+0.5)) / p
}

// ms is a duration in milliseconds, for figures that stay readable in JSON.
func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// secs is a duration in seconds with one decimal.
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
