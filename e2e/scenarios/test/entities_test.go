package scenariotest

import (
	"fmt"

	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardid"
	"kshard.local/e2e/scenarios/shardmap"
)

// numberedEntities returns n entities prefix-0 .. prefix-(n-1).
func numberedEntities(prefix string, n, shards int) []*load.Entity {
	out := make([]*load.Entity, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = &load.Entity{ID: id, Shard: shardid.Of(id, shards)}
	}
	return out
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
