// Package envvar reads the environment variables that a program or a test suite cannot run
// without. One copy for the end-to-end suites and their pods' programs (e2e/support/README.md).
package envvar

import (
	"log"
	"os"
	"testing"
)

// Must returns the variable `name`, and ends the program (log.Fatalf: "<name> is not set") when
// it is unset or empty.
func Must(name string) string {
	v := os.Getenv(name)
	if v == "" {
		log.Fatalf("%s is not set", name)
	}
	return v
}

// ForTests returns a suite's reader of the variables its run script sets: it returns the
// variable `name`, or fails t with "<name> is not set: <how>" when it is unset or empty. `how`
// says how to run the suite ("run the tests through e2e/operator/run.sh").
func ForTests(how string) func(t testing.TB, name string) string {
	return func(t testing.TB, name string) string {
		t.Helper()
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set: %s", name, how)
		}
		return v
	}
}
