// Package history is the nemesis's record of what the clients saw (every increment and read of
// the counters: when it started and ended, through which pod, the answer or the error) and the
// checks of kshard's promise against it, with the counter's activation log and the node's
// container log:
//
//   - CheckFinal: every acknowledged increment is in the counter's final value, and no increment
//     that surely failed was applied (final ≤ acknowledged + outcome unknown);
//   - CheckOrder: no counter's value ever goes back in real time, and no two acknowledged
//     increments of one counter got the same value;
//   - CheckActivations: no two pods had overlapping activations of one counter.
//
// Each check returns Violations; the package does no I/O and is unit-tested on small histories.
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"kshard.local/e2e/scenarios/load"
)

// Kind of an operation.
type Kind string

// Operations on a counter.
const (
	Increment Kind = "increment"
	Read      Kind = "read"
)

// Outcome of an operation as the client can tell.
type Outcome string

// Outcomes.
const (
	// OK: answered with the counter's value.
	OK Outcome = "ok"
	// NotApplied: failed in a way that says the message never reached the app (refused, not
	// delivered: SendTimeout, AppUnavailable, ...; docs/reliability.md).
	NotApplied Outcome = "not-applied"
	// Unknown: failed in a way that leaves open whether the app applied it (OutcomeUnknown,
	// the connection broke, no answer in time).
	Unknown Outcome = "unknown"
)

// Op is one operation of a client on a counter.
type Op struct {
	Counter string    `json:"counter"`
	Kind    Kind      `json:"kind"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	// Entry is the pod the request went through (the last one tried); ServedBy the pod whose
	// counter answered.
	Entry    string  `json:"entry,omitempty"`
	ServedBy string  `json:"servedBy,omitempty"`
	Outcome  Outcome `json:"outcome"`
	// Value of the answer (OK only).
	Value int64 `json:"value"`
	// Code of a failure (the error code of the answer, or of the transport: CodeOf).
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Source: "load", "probe" (recovery probes) or "final" (the reads at the end).
	Source string `json:"source"`
}

// Codes of failures that did not come with an error code from kshard or the app.
const (
	CodeNotDelivered     = "NotDelivered"     // no connection to the entry pod
	CodeNoReadyPod       = "NoReadyPod"       // no pod to send it through
	CodeClientTimeout    = "ClientTimeout"    // no answer within the client's timeout
	CodeConnectionBroken = "ConnectionBroken" // the connection broke after the request went out
	CodeBadReply         = "BadReply"         // a 200 whose body is not the counter's
)

// notApplied lists the codes that say a message was not applied: kshard's documented refusals
// (docs/reliability.md, protocol/wire.h: not delivered), the counter's fenced save (its store
// refused the write), and failures before the request reached any pod.
var notApplied = map[string]bool{
	"SendTimeout": true, "AppUnavailable": true, "EntityOverloaded": true,
	"EntityNotManagedByThisPod": true, "NotReady": true, "BadRequest": true, "Fenced": true,
	CodeNotDelivered: true, CodeNoReadyPod: true,
}

// Classify says what a failure with that code means for the counter.
func Classify(code string) Outcome {
	if notApplied[code] {
		return NotApplied
	}
	return Unknown
}

// CodeOf names the failure of a request of the load package's client.
func CodeOf(err error) string {
	var he *load.HTTPError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &he):
		if he.Code == "" {
			return fmt.Sprintf("HTTP%d", he.Status)
		}
		return he.Code
	case errors.Is(err, load.ErrNoReadyPod):
		return CodeNoReadyPod
	case errors.Is(err, load.ErrNotDelivered):
		return CodeNotDelivered
	case err.Error() == "timeout":
		return CodeClientTimeout
	case strings.HasPrefix(err.Error(), "bad reply"):
		return CodeBadReply
	}
	return CodeConnectionBroken
}

// FromRequest makes the Op of a request of the load package's client.
func FromRequest(q load.Request, kind Kind, value int64, err error, source string) Op {
	op := Op{Counter: q.Entity, Kind: kind, Start: q.Start, End: q.End, Entry: q.Entry,
		ServedBy: q.ServedBy, Source: source}
	if q.OK {
		op.Outcome, op.Value = OK, value
		return op
	}
	op.Code = CodeOf(err)
	op.Outcome = Classify(op.Code)
	if err != nil {
		op.Detail = err.Error()
	}
	return op
}

// Recorder collects the operations of a run from many goroutines.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Add records an operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// Ops returns a copy of every operation so far, in the order they started.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := slices.Clone(r.ops)
	r.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Op) int { return a.Start.Compare(b.Start) })
	return out
}

// WriteJSONL writes operations one JSON object per line.
func WriteJSONL(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return nil
}

// Violation is one contradiction of kshard's promise found by a check.
type Violation struct {
	// Check: "lost", "excess", "unread", "went-back", "duplicate", "overlap", "value-gap" or
	// "anomaly".
	Check   string    `json:"check"`
	Counter string    `json:"counter"`
	At      time.Time `json:"at"`
	Text    string    `json:"text"`
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

func describe(op Op) string {
	s := fmt.Sprintf("%s started %s ended %s via %s", op.Kind, stamp(op.Start), stamp(op.End), op.Entry)
	if op.Outcome == OK {
		return fmt.Sprintf("%s answered %d (served by %s)", s, op.Value, op.ServedBy)
	}
	return fmt.Sprintf("%s failed %s", s, op.Code)
}
