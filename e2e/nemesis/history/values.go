package history

import (
	"fmt"
	"sort"
	"time"
)

// Tally counts the increments of one counter by outcome.
type Tally struct {
	Acked      int `json:"acknowledged"`
	Unknown    int `json:"unknown"`
	NotApplied int `json:"notApplied"`
}

// Tallies counts the increments of every counter that has any operation.
func Tallies(ops []Op) map[string]*Tally {
	out := map[string]*Tally{}
	for _, op := range ops {
		t := out[op.Counter]
		if t == nil {
			t = &Tally{}
			out[op.Counter] = t
		}
		if op.Kind != Increment {
			continue
		}
		switch op.Outcome {
		case OK:
			t.Acked++
		case Unknown:
			t.Unknown++
		default:
			t.NotApplied++
		}
	}
	return out
}

// CheckFinal checks every counter's final value (read once every fault was healed and the load
// had stopped; counters start at 0): at least its acknowledged increments ("lost" otherwise),
// at most those plus the ones whose outcome is unknown ("excess": an increment that surely
// failed was applied, or one was applied twice). A counter without a final value is "unread".
func CheckFinal(ops []Op, final map[string]int64) []Violation {
	byCounter := map[string][]Op{}
	for _, op := range ops {
		byCounter[op.Counter] = append(byCounter[op.Counter], op)
	}
	var out []Violation
	for _, id := range sortedKeys(byCounter) {
		counterOps := byCounter[id]
		t := Tallies(counterOps)[id]
		v, ok := final[id]
		switch {
		case !ok:
			out = append(out, Violation{"unread", id, lastEnd(counterOps),
				fmt.Sprintf("%s: no final value was read (%d acknowledged increments unchecked)", id, t.Acked)})
		case v < int64(t.Acked):
			lost := firstAckedAbove(counterOps, v)
			out = append(out, Violation{"lost", id, lost.End,
				fmt.Sprintf("%s: final value %d < %d acknowledged increments (%d unknown, %d not applied); first acknowledged increment not in it: %s",
					id, v, t.Acked, t.Unknown, t.NotApplied, describe(lost))})
		case v > int64(t.Acked+t.Unknown):
			out = append(out, Violation{"excess", id, lastEnd(counterOps),
				fmt.Sprintf("%s: final value %d > %d acknowledged + %d unknown increments (%d failed as not applied)",
					id, v, t.Acked, t.Unknown, t.NotApplied)})
		}
	}
	return out
}

// firstAckedAbove is the acknowledged increment that ended first among those whose value the
// final value v does not reach, or else the last acknowledged one.
func firstAckedAbove(ops []Op, v int64) Op {
	var best, last Op
	for _, op := range ops {
		if op.Kind != Increment || op.Outcome != OK {
			continue
		}
		if op.Value > v && (best.End.IsZero() || op.End.Before(best.End)) {
			best = op
		}
		if op.End.After(last.End) {
			last = op
		}
	}
	if best.End.IsZero() {
		return last
	}
	return best
}

func lastEnd(ops []Op) time.Time {
	var t time.Time
	for _, op := range ops {
		if op.End.After(t) {
			t = op.End
		}
	}
	return t
}

// CheckOrder checks that no counter's value goes back in real time: when an operation A was
// answered v before an operation B started, B's answer is ≥ v, and > v when B is an increment
// ("went-back"); and that no two acknowledged increments of a counter got the same value
// ("duplicate": one of them was lost or applied to a stale copy). At most perCounter violations
// of each counter are returned; the second result counts all of them by check.
func CheckOrder(ops []Op, perCounter int) ([]Violation, map[string]int) {
	byCounter := map[string][]Op{}
	for _, op := range ops {
		if op.Outcome == OK {
			byCounter[op.Counter] = append(byCounter[op.Counter], op)
		}
	}
	var out []Violation
	counts := map[string]int{}
	for _, id := range sortedKeys(byCounter) {
		vs := orderOf(id, byCounter[id])
		for _, v := range vs {
			counts[v.Check]++
		}
		if len(vs) > perCounter {
			vs = vs[:perCounter]
		}
		out = append(out, vs...)
	}
	return out, counts
}

// orderOf checks one counter's acknowledged operations: a sweep over them by start time, with
// the highest value answered by those that ended before.
func orderOf(id string, ops []Op) []Violation {
	byStart := append([]Op(nil), ops...)
	sort.SliceStable(byStart, func(i, j int) bool { return byStart[i].Start.Before(byStart[j].Start) })
	byEnd := append([]Op(nil), ops...)
	sort.SliceStable(byEnd, func(i, j int) bool { return byEnd[i].End.Before(byEnd[j].End) })
	var out []Violation
	var highest *Op
	next := 0
	for _, b := range byStart {
		for next < len(byEnd) && byEnd[next].End.Before(b.Start) {
			if highest == nil || byEnd[next].Value > highest.Value {
				highest = &byEnd[next]
			}
			next++
		}
		if highest == nil {
			continue
		}
		want := highest.Value
		if b.Kind == Increment {
			want++
		}
		if b.Value < want {
			out = append(out, Violation{"went-back", id, b.Start,
				fmt.Sprintf("%s: went back: %s, after %s", id, describe(b), describe(*highest))})
		}
	}
	seen := map[int64]Op{}
	for _, op := range byStart {
		if op.Kind != Increment {
			continue
		}
		if first, dup := seen[op.Value]; dup {
			out = append(out, Violation{"duplicate", id, op.Start,
				fmt.Sprintf("%s: two increments answered %d: %s, and %s", id, op.Value, describe(first), describe(op))})
			continue
		}
		seen[op.Value] = op
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
