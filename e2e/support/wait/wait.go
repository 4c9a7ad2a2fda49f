// Package wait polls a condition until it holds, or until a deadline, and then says what did not
// happen and what the condition said last. One copy for the end-to-end suites
// (e2e/support/README.md).
//
// A condition returns whether it holds and a short description of the state it saw ("2 of 3
// pods ready"); an empty description keeps the previous one.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Cond is a condition: whether it holds, and what it saw.
type Cond func() (bool, string)

// TimeoutError is what Until returns when the condition did not hold in time.
type TimeoutError struct {
	Timeout time.Duration
	Last    string // what the condition said last ("" when it never said anything)
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("not within %s; last state: %s", e.Timeout, e.Last)
}

// Until polls cond every `every` until it holds and returns how long that took; after timeout
// it returns how long it waited and a *TimeoutError with what cond said last.
func Until(timeout, every time.Duration, cond Cond) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return time.Since(start), nil
		}
		if msg != "" {
			last = msg
		}
		if time.Now().After(deadline) {
			return time.Since(start), &TimeoutError{Timeout: timeout, Last: last}
		}
		time.Sleep(every)
	}
}

// For polls cond every `every` until it holds and returns how long that took; after timeout it
// fails t with "timed out after <timeout> waiting <what>; last state: <what cond said last>".
// `what` reads after "waiting": "until the pod is gone", "for the pod to be gone".
func For(t testing.TB, timeout, every time.Duration, what string, cond Cond) time.Duration {
	t.Helper()
	took, err := Until(timeout, every, cond)
	if err != nil {
		t.Fatalf("timed out after %s waiting %s; last state: %s", timeout, what, err.(*TimeoutError).Last)
	}
	return took
}

// Holds checks cond every `every` for d (what must not happen takes watching), failing t with
// "<what> stopped holding: <what cond said>" the first time it does not hold.
func Holds(t testing.TB, d, every time.Duration, what string, cond Cond) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(every) {
		if ok, msg := cond(); !ok {
			t.Fatalf("%s stopped holding: %s", what, msg)
		}
	}
}
