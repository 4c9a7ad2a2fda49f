// Large ShardMaps as a real cluster leaves them, for the tests and benchmarks of the map's size
// (sharding/json_delta.h, sharding/shard_map_segments.h, bench/map_delta_bench.cc).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/random.h"
#include "sharding/shard_map.h"

namespace kshard::testing {

// A balanced map as registration leaves it: each pod's shards scattered over the id space, given
// in two rounds; pod names, uids and addresses as Kubernetes makes them.
inline sharding::ShardMap balancedMap(std::int32_t shards, std::int32_t pods, Random& r) {
  using namespace sharding;
  ShardMap m;
  m.metadata.name = "counter";
  m.metadata.namespace_ = "demo";
  m.metadata.uid = "6d1f0c2a-9b8e-4f7d-a6c5-3e2d1c0b9a87";
  m.metadata.resourceVersion = "1000";
  m.spec.shards = shards;
  m.status.epoch = 40;
  for (std::int32_t i = 0; i < pods; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08x-1f2e-4d3c-8b7a-%012x", static_cast<unsigned>(i),
                  static_cast<unsigned>(r.uniform(1u << 30)));
    m.status.pods.push_back({"counter-7d9c8b5f4-" + std::to_string(10000 + i), uid,
                             "10.244." + std::to_string(i / 250) + "." +
                                 std::to_string(i % 250 + 1) + ":7101",
                             "1.4.2", 0, std::to_string(0xa1b2c3d4e5f60000ULL + i), {}});
  }
  ShardTable table(shards);
  std::vector<ShardId> order(static_cast<std::size_t>(shards));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<ShardId>(i + 1);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[r.uniform(i)]);
  for (std::size_t i = 0; i < order.size(); ++i) {
    table.assign(order[i], static_cast<PodIndex>(i % static_cast<std::size_t>(pods)),
                 30 + static_cast<std::int64_t>(r.uniform(2)));
  }
  writeShardTable(table, m.status);
  return m;
}

// The next version: 1 % of the shards, chosen at random, move to other pods at a new epoch.
inline sharding::ShardMap afterOneRound(const sharding::ShardMap& before, Random& r) {
  using namespace sharding;
  ShardMap next = before;
  next.metadata.resourceVersion = "1001";
  next.status.epoch = before.status.epoch + 1;
  auto table = shardTableFromStatus(before.status, before.spec.shards);
  const auto pods = static_cast<std::uint64_t>(before.status.pods.size());
  for (std::int32_t k = 0; k < before.spec.shards / 100; ++k) {
    const auto shard = static_cast<ShardId>(
        r.uniform(static_cast<std::uint64_t>(before.spec.shards)) + 1);
    table->assign(shard, static_cast<PodIndex>(r.uniform(pods)), next.status.epoch);
  }
  writeShardTable(*table, next.status);
  return next;
}

}  // namespace kshard::testing
