package envvar

import (
	"fmt"
	"testing"
)

// fakeT records what a suite's env reader says when it fails.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestForTestsReturnsTheVariable(t *testing.T) {
	t.Setenv("KSHARD_ENVVAR_TEST", "value")
	f := &fakeT{TB: t}
	if got := ForTests("run it through run.sh")(f, "KSHARD_ENVVAR_TEST"); got != "value" || f.failed != "" {
		t.Fatalf("got %q, failure %q; want \"value\" and no failure", got, f.failed)
	}
}

func TestForTestsFailsOnAnEmptyVariable(t *testing.T) {
	t.Setenv("KSHARD_ENVVAR_TEST", "")
	f := &fakeT{TB: t}
	ForTests("run it through run.sh")(f, "KSHARD_ENVVAR_TEST")
	if want := "KSHARD_ENVVAR_TEST is not set: run it through run.sh"; f.failed != want {
		t.Fatalf("failure %q, want %q", f.failed, want)
	}
}

func TestMustReturnsTheVariable(t *testing.T) {
	t.Setenv("KSHARD_ENVVAR_TEST", "value")
	if got := Must("KSHARD_ENVVAR_TEST"); got != "value" {
		t.Fatalf("Must = %q, want \"value\"", got)
	}
}
