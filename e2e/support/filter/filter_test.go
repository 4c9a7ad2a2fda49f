package filter

import (
	"slices"
	"testing"
)

func TestKeep(t *testing.T) {
	even := func(n int) bool { return n%2 == 0 }
	if got := Keep([]int{1, 2, 3, 4, 6}, even); !slices.Equal(got, []int{2, 4, 6}) {
		t.Errorf("Keep = %v, want [2 4 6]", got)
	}
	if got := Keep([]int{1, 3}, even); got != nil {
		t.Errorf("Keep of no match = %#v, want nil", got)
	}
	xs := []int{2, 1}
	got := Keep(xs, even)
	got[0] = 8
	if xs[0] != 2 {
		t.Errorf("Keep's result shares memory with its input")
	}
}
