// Package load is the scenarios' load driver: it sends increments to many counters of the
// counter example (examples/counter) through its public API on the pod IPs, each request entering
// through a randomly chosen ready pod (and so through a different sidecar), and checks every reply.
//
// Each entity is driven by exactly one goroutine, so its increments are sequential and every
// acknowledged reply must carry exactly the previous value + 1. A request that fails may or may
// not have been applied; Entity keeps the bounds that makes the final check precise.
package load

import (
	"fmt"
	"math"

	"kshard.local/e2e/scenarios/shardid"
)

// Entity is one counter and what the driver knows about it. Only its driving goroutine touches
// it while a driver runs.
type Entity struct {
	ID    string
	Shard int

	// Last is the value of the last acknowledged reply (0 before any).
	Last int64
	// Acked counts acknowledged increments.
	Acked int64
	// Pending counts failed increments since the last acknowledged reply: each may or may not
	// have been applied, so the next reply may carry Last+1 .. Last+1+Pending.
	Pending int64
	// Failed counts every failed increment; Applied those of them later proven applied (by a
	// reply or the final read).
	Failed  int64
	Applied int64
	// Violations: replies that contradict a single, lossless owner.
	Violations []string
}

// OnAck takes an acknowledged reply carrying value v.
func (e *Entity) OnAck(v int64) error {
	lo, hi := e.Last+1, e.Last+1+e.Pending
	var err error
	if v < lo || v > hi {
		err = fmt.Errorf("entity %s: reply value %d outside %d..%d (last acknowledged %d, %d failed since)",
			e.ID, v, lo, hi, e.Last, e.Pending)
		e.Violations = append(e.Violations, err.Error())
	} else {
		e.Applied += v - lo
	}
	e.Last, e.Pending = v, 0
	e.Acked++
	return err
}

// OnFailure takes an increment whose outcome is unknown.
func (e *Entity) OnFailure() {
	e.Pending++
	e.Failed++
}

// CheckFinal takes the counter's value read after the driver stopped: it must lie in
// Last .. Last+Pending. Below means an acknowledged increment was lost.
func (e *Entity) CheckFinal(v int64) error {
	if v < e.Last || v > e.Last+e.Pending {
		err := fmt.Errorf("entity %s: final value %d outside %d..%d (%d acknowledged, %d failed)",
			e.ID, v, e.Last, e.Last+e.Pending, e.Acked, e.Failed)
		e.Violations = append(e.Violations, err.Error())
		return err
	}
	e.Applied += v - e.Last
	e.Pending = 0
	e.Last = v
	return nil
}

// CoveringEntities returns entities named prefix-0, prefix-1, … chosen so that every shard
// 1..shards has exactly perShard of them: traffic then reaches every pod and every move.
func CoveringEntities(prefix string, shards, perShard int) []*Entity {
	count := make([]int, shards+1)
	missing := shards * perShard
	var out []*Entity
	for n := 0; missing > 0; n++ {
		id := fmt.Sprintf("%s-%d", prefix, n)
		s := shardid.Of(id, shards)
		if count[s] == perShard {
			continue
		}
		count[s]++
		missing--
		out = append(out, &Entity{ID: id, Shard: s})
	}
	return out
}

// ZipfWeights are the weights of n entities under Zipf's law with exponent exp: the entity of
// rank i (from 1) weighs 1 / i^exp, so with exp = 1 the first is sent twice as much as the
// second and n times as much as the last.
func ZipfWeights(n int, exp float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Pow(float64(i+1), -exp)
	}
	return out
}

// EntitiesOnShards returns n entities prefix-k whose shard (of `shards`) is one of `on`, in the
// order of k.
func EntitiesOnShards(prefix string, n int, on []int, shards int) []*Entity {
	wanted := map[int]bool{}
	for _, s := range on {
		wanted[s] = true
	}
	var out []*Entity
	for k := 0; len(out) < n && len(wanted) > 0; k++ {
		id := fmt.Sprintf("%s-%d", prefix, k)
		if s := shardid.Of(id, shards); wanted[s] {
			out = append(out, &Entity{ID: id, Shard: s})
		}
	}
	return out
}

// OneEntityPerShard picks, among entities, one of each of the given shards.
func OneEntityPerShard(entities []*Entity, shards []int) (picked []*Entity, missing []int) {
	byShard := map[int]*Entity{}
	for _, e := range entities {
		if byShard[e.Shard] == nil {
			byShard[e.Shard] = e
		}
	}
	for _, s := range shards {
		if e := byShard[s]; e != nil {
			picked = append(picked, e)
		} else {
			missing = append(missing, s)
		}
	}
	return picked, missing
}
