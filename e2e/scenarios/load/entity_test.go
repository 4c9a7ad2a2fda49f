package load

import "testing"

func TestEveryReplyIsThePreviousPlusOne(t *testing.T) {
	e := &Entity{ID: "a"}
	for v := int64(1); v <= 3; v++ {
		if err := e.OnAck(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.OnAck(5); err == nil {
		t.Fatal("a skipped value was accepted")
	}
	if err := e.OnAck(5); err == nil {
		t.Fatal("a repeated value was accepted")
	}
	if err := e.CheckFinal(5); err != nil || len(e.Violations) != 2 {
		t.Fatalf("final: %v, violations %v", err, e.Violations)
	}
}

func TestFailuresWidenTheNextReplyAndAreCountedWhenApplied(t *testing.T) {
	e := &Entity{ID: "a"}
	_ = e.OnAck(1)
	e.OnFailure()
	e.OnFailure()
	if err := e.OnAck(3); err != nil { // one of the two failures was applied
		t.Fatal(err)
	}
	e.OnFailure()
	if err := e.CheckFinal(4); err != nil { // and the last one too
		t.Fatal(err)
	}
	if e.Acked != 2 || e.Failed != 3 || e.Applied != 2 || e.Last != 4 {
		t.Fatalf("entity %+v", e)
	}
}

func TestLostAcknowledgedIncrementIsAViolation(t *testing.T) {
	e := &Entity{ID: "a"}
	_ = e.OnAck(1)
	_ = e.OnAck(2)
	if err := e.CheckFinal(1); err == nil {
		t.Fatal("a final value below the last acknowledged one was accepted")
	}
	e = &Entity{ID: "b"}
	_ = e.OnAck(1)
	if err := e.CheckFinal(3); err == nil {
		t.Fatal("a final value above every attempt was accepted")
	}
}

func TestZipfWeightsFallAsOneOverTheRank(t *testing.T) {
	w := ZipfWeights(4, 1.0)
	want := []float64{1, 0.5, 1.0 / 3, 0.25}
	for i := range want {
		if diff := w[i] - want[i]; diff > 1e-12 || diff < -1e-12 {
			t.Fatalf("weights %v, want %v", w, want)
		}
	}
	if flat := ZipfWeights(3, 0); flat[0] != 1 || flat[2] != 1 {
		t.Fatalf("exponent 0 is uniform, got %v", flat)
	}
}

func TestEntitiesOnShardsStayOnThoseShards(t *testing.T) {
	on := []int{3, 17, 250}
	es := EntitiesOnShards("z", 20, on, 300)
	if len(es) != 20 {
		t.Fatalf("got %d entities, want 20", len(es))
	}
	for _, e := range es {
		if e.Shard != 3 && e.Shard != 17 && e.Shard != 250 {
			t.Fatalf("%s is on shard %d, not one of %v", e.ID, e.Shard, on)
		}
	}
	if none := EntitiesOnShards("z", 5, nil, 300); len(none) != 0 {
		t.Fatalf("no shard given, got %d entities", len(none))
	}
}
