// Builders of ShardMaps for sidecar tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sharding/shard_map.h"

namespace kshard::sidecar::testing {

// A map of `shards` shards at `epoch` where pods[i] owns the given ranges (range form). Pod p's
// uid is "p-uid", its sidecar's incarnation "p-inc".
inline sharding::ShardMap makeMap(std::int32_t shards, std::int64_t epoch,
                                  const std::vector<std::pair<std::string, std::string>>& owners) {
  sharding::ShardMap m;
  m.metadata.name = "counter";
  m.metadata.namespace_ = "demo";
  m.spec.shards = shards;
  m.status.epoch = epoch;
  for (const auto& [pod, ranges] : owners) {
    m.status.pods.push_back({pod, pod + "-uid",
                             "10.0.0." + std::to_string(m.status.pods.size() + 1) + ":7101",
                             "1.0.0", 0, pod + "-inc", {}});
    auto set = sharding::ShardSet::parse(ranges, shards);
    if (set.ok() && !set->empty()) m.status.assignments.push_back({pod, epoch, *set});
  }
  return m;
}

}  // namespace kshard::sidecar::testing
