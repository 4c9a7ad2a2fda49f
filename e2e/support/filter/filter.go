// Package filter picks the elements of a list that satisfy a condition. One copy for the
// end-to-end suites' records of a run (e2e/support/README.md).
package filter

// Keep returns, in their order, the elements of xs for which keep is true: a new slice, nil when
// there are none.
func Keep[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}
