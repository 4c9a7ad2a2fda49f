package runner

import (
	"fmt"
	"strings"
)

func (rep *Report) checksSection(b *strings.Builder) {
	b.WriteString("\n## Checks\n\n")
	c := rep.Checks
	if c == nil {
		b.WriteString("Not run: the run broke off before the end (see the problems).\n")
		return
	}
	a := c.Activations
	fmt.Fprintf(b, "- %d counters; %d increments acknowledged, %d with an unknown outcome, %d surely not applied.\n",
		c.Counters, c.Acked, c.Unknown, c.NotApplied)
	fmt.Fprintf(b, "- Every acknowledged increment present (final value ≥ acknowledged, ≤ acknowledged + unknown): %s.\n",
		verdict(c.Counts, "lost", "excess", "unread"))
	fmt.Fprintf(b, "- No value going back in real time, no value given to two increments: %s.\n",
		verdict(c.Counts, "went-back", "duplicate"))
	fmt.Fprintf(b, "- No two pods with overlapping activations of a counter (remembered for the run, so started again without a message after every move) or of the singletons (%d activations, %d stops, %d handoffs, "+
		"%d ended by the app container's exit or a release (%d app exits and %d releases seen), %d still open at the end): %s.\n",
		a.Activations, a.Stops, a.Handoffs, a.ClosedByKill, c.AppExits, c.Releases, a.StillOpen,
		verdict(c.Counts, "overlap", "value-gap", "anomaly"))
	fmt.Fprintf(b, "- Every version of the ShardMap gives each shard one owner at most: %s.\n", verdict(c.Counts, "shardmap"))
	if len(c.Violations) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Violations (%d; the first %d, each with the faults around it)\n\n", c.Total(), len(c.Violations))
	for _, v := range c.Violations {
		fmt.Fprintf(b, "- **%s** %s: %s — during: %s\n", v.Check, clock(v.At), v.Text, describeFaults(attribution(rep.Faults, v.At)))
	}
}

func verdict(counts map[string]int, checks ...string) string {
	var parts []string
	for _, c := range checks {
		if n := counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	if len(parts) == 0 {
		return "passed"
	}
	return "**FAILED**: " + strings.Join(parts, ", ")
}

func (rep *Report) faultTable(b *strings.Builder) {
	b.WriteString("\n## The faults as they ran\n\n")
	b.WriteString("| step | fault | target | injected | healed after | every shard answers after the heal | notes |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range rep.Faults {
		injected, healed, recovered := "—", "—", "—"
		if !f.Injected.IsZero() {
			injected = clock(f.Injected)
		}
		if !f.Healed.IsZero() && !f.Injected.IsZero() {
			healed = secs(f.Healed.Sub(f.Injected))
		}
		if d := f.Recovery(); d >= 0 {
			recovered = secs(d)
		} else if !f.Injected.IsZero() {
			recovered = "not within " + recoveryDeadline.String()
		}
		notes := append([]string(nil), f.Notes...)
		if f.Error != "" {
			notes = append(notes, "error: "+f.Error)
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s |\n", f.Step, f.Plan, f.Target, injected, healed, recovered,
			strings.ReplaceAll(strings.Join(notes, "; "), "|", "/"))
	}
}
