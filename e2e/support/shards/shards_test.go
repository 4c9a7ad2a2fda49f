package shards

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	for text, want := range map[string][]int{
		"1-3,7":       {1, 2, 3, 7},
		"1-3,7, 9-10": {1, 2, 3, 7, 9, 10},
		" 5 - 6 ":     {5, 6},
		"4":           {4},
		"":            nil,
		"  ":          nil,
		"7,1-2":       {7, 1, 2},
	} {
		got, err := Parse(text)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"x", "3-1", "1-", "1,,2", "-1-2", "1-x"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted: %v", bad, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for want, ids := range map[string][]int{
		"":        nil,
		"4":       {4},
		"1-3,7":   {7, 3, 1, 2},
		"1,3,5-6": {6, 5, 3, 1},
		"1-10,20": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20},
	} {
		if got := Format(ids); got != want {
			t.Errorf("Format(%v) = %q; want %q", ids, got, want)
		}
		back, err := Parse(want)
		if err != nil || len(back) != len(ids) {
			t.Errorf("Parse(Format(%v)) = %v, %v", ids, back, err)
		}
	}
}
