// Package shards reads and writes kshard's range form of a set of shard ids ("1-3,7"), as the
// ShardMap's status.assignments, the peer API's assign, unassign and ping, and the manager API
// carry it. One copy for the end-to-end suites and the benchmarks (e2e/support/README.md).
package shards

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Parse reads the range form "1-10,20" into shard ids, in the order written. Blanks around the
// text, a part or a bound are allowed; an empty text is no shards; a part that is not a number
// or a range lo-hi with lo <= hi is an error that names it.
func Parse(text string) ([]int, error) {
	var out []int
	if strings.TrimSpace(text) == "" {
		return out, nil
	}
	for _, part := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("bad range %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("bad range %q", part)
			}
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	}
	return out, nil
}

// Format writes the canonical range form: ascending, runs of consecutive ids as lo-hi, "" for
// none. It sorts `ids` in place.
func Format(ids []int) string {
	sort.Ints(ids)
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(ids[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
