package scenariotest

import (
	"fmt"

	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardid"
	"kshard.local/e2e/scenarios/shardmap"
)

// coveringEntities returns entities named prefix-0, prefix-1, … chosen so that every shard
// 1..shards has exactly perShard of them: traffic then reaches every pod and every move.
func coveringEntities(prefix string, shards, perShard int) []*load.Entity {
	count := make([]int, shards+1)
	missing := shards * perShard
	var out []*load.Entity
	for n := 0; missing > 0; n++ {
		id := fmt.Sprintf("%s-%d", prefix, n)
		s := shardid.Of(id, shards)
		if count[s] == perShard {
			continue
		}
		count[s]++
		missing--
		out = append(out, &load.Entity{ID: id, Shard: s})
	}
	return out
}

// numberedEntities returns n entities prefix-0 .. prefix-(n-1).
func numberedEntities(prefix string, n, shards int) []*load.Entity {
	out := make([]*load.Entity, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = &load.Entity{ID: id, Shard: shardid.Of(id, shards)}
	}
	return out
}

// oneEntityPerShard picks, among entities, one of each of the given shards.
func oneEntityPerShard(entities []*load.Entity, shards []int) (picked []*load.Entity, missing []int) {
	byShard := map[int]*load.Entity{}
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

// balanced says whether the map has exactly `pods` registered pods, every shard assigned, and
// shard counts that differ by at most one; the message says what is off.
func balanced(m *shardmap.ShardMap, pods int) (bool, string) {
	counts, diff := m.Spread()
	ok := len(m.Status.Pods) == pods && m.Unassigned() == 0 && diff <= 1
	return ok, fmt.Sprintf("want %d pods within one; shards per pod %v; %s", pods, counts, m.Describe())
}

// shardsOf lists the shards the map gives to pod.
func shardsOf(m *shardmap.ShardMap, pod string) []int {
	var out []int
	for i, o := range m.Owners {
		if o == pod {
			out = append(out, i+1)
		}
	}
	return out
}
