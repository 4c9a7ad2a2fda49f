package wait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatals records what For and Holds would fail the test with.
type fatals struct {
	testing.TB
	said []string
}

func (f *fatals) Helper() {}
func (f *fatals) Fatalf(format string, args ...any) {
	f.said = append(f.said, fmt.Sprintf(format, args...))
}

func TestUntilSaysWhatDidNotHappen(t *testing.T) {
	n := 0
	if _, err := Until(time.Second, time.Millisecond, func() (bool, string) { n++; return n == 3, "" }); err != nil || n != 3 {
		t.Fatalf("n %d, %v", n, err)
	}
	calls := 0
	_, err := Until(20*time.Millisecond, time.Millisecond, func() (bool, string) {
		calls++
		if calls == 1 {
			return false, "still 2 pods"
		}
		return false, "" // keeps what was said before
	})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Last != "still 2 pods" || te.Timeout != 20*time.Millisecond ||
		err.Error() != "not within 20ms; last state: still 2 pods" {
		t.Fatalf("got %v", err)
	}
}

func TestForFailsWithWhat(t *testing.T) {
	f := &fatals{TB: t}
	For(f, 10*time.Millisecond, time.Millisecond, "until 3 pods are ready", func() (bool, string) { return false, "2 ready" })
	if len(f.said) != 1 || f.said[0] != "timed out after 10ms waiting until 3 pods are ready; last state: 2 ready" {
		t.Fatalf("said %q", f.said)
	}
	f = &fatals{TB: t}
	if For(f, time.Second, time.Millisecond, "for nothing", func() (bool, string) { return true, "" }) > time.Second || len(f.said) != 0 {
		t.Fatalf("said %q", f.said)
	}
}

func TestHolds(t *testing.T) {
	f := &fatals{TB: t}
	Holds(f, 10*time.Millisecond, time.Millisecond, "one owner", func() (bool, string) { return true, "" })
	if len(f.said) != 0 {
		t.Fatalf("said %q", f.said)
	}
	n := 0
	Holds(f, 10*time.Millisecond, time.Millisecond, "one owner", func() (bool, string) { n++; return n < 3, "shard 4 on a and b" })
	if len(f.said) == 0 || !strings.HasPrefix(f.said[0], "one owner stopped holding: shard 4 on a and b") {
		t.Fatalf("said %q", f.said)
	}
}
