package load

import (
	"testing"
	"time"
)

func TestOverlappingCountsRequestsCutOffByAFault(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &Recorder{}
	r.add(Request{Driver: "a", Entity: "before", Start: t0.Add(-2 * time.Second), End: t0.Add(-time.Second)})
	r.add(Request{Driver: "a", Entity: "cut", Start: t0.Add(-time.Second), End: t0.Add(time.Second)})
	r.add(Request{Driver: "b", Entity: "inside", Start: t0.Add(time.Second), End: t0.Add(2 * time.Second)})
	r.add(Request{Driver: "a", Entity: "after", Start: t0.Add(5 * time.Second), End: t0.Add(6 * time.Second)})
	got := r.Overlapping(t0, t0.Add(5*time.Second))
	if len(got) != 2 || got[0].Entity != "cut" || got[1].Entity != "inside" {
		t.Fatalf("got %+v", got)
	}
	if a := Of(got, "a"); len(a) != 1 || a[0].Entity != "cut" {
		t.Fatalf("Of: %+v", a)
	}
	if n := len(r.Between(t0, t0.Add(5*time.Second))); n != 1 {
		t.Fatalf("Between: %d", n)
	}
}
