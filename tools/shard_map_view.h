// What `kshardctl owner`, `map` and `top` (and `kubectl kshard ...`, the same binary) show of a
// ShardMap read from the cluster: pure functions of the object, tested without a cluster.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sharding/shard_map.h"

namespace kshard::tools {

struct OwnerRow {
  std::string entity;
  sharding::ShardId shard = 0;
  std::string pod;         // empty: the shard is unassigned
  std::string version;     // the owner's version label
  std::int64_t epoch = 0;  // the owner's assignment epoch for the shard
};

// The shard and owner of each entity id, as every sidecar computes them from this map.
// InvalidArgument for an id that is not valid UTF-8; FailedPrecondition for a status with two
// owners for a shard.
[[nodiscard]] StatusOr<std::vector<OwnerRow>> ownersOf(const sharding::ShardMap& map,
                                                       const std::vector<std::string>& ids);

// A table of the rows: ENTITY SHARD POD VERSION EPOCH ("<unassigned>" for no owner).
std::string formatOwners(const std::vector<OwnerRow>& rows);

// The map as a table: a header line (namespace/name, shards, epoch, manager), then a row per
// registered pod in registration order (POD VERSION SHARDS RANGES), then the unassigned shards.
// FailedPrecondition for a status with two owners for a shard.
[[nodiscard]] StatusOr<std::string> formatMap(const sharding::ShardMap& map);

// The measured load (app busy seconds per second) of the map's pods: a header line (namespace/
// name, balance mode, the pods' peak-to-mean with the tolerance in load mode and the hottest
// shard's bound, the total), then a row per registered pod, busiest first, pods of unknown load
// last in registration order (NAME SHARDS LOAD SHARE, "-" for unknown). Without status.load, the
// header line says that the pods have not reported their load yet. FailedPrecondition for a
// status with two owners for a shard.
[[nodiscard]] StatusOr<std::string> formatTopPods(const sharding::ShardMap& map);

// The hottest shards the status keeps (sharding::kHottestShards at most), busiest first: the same
// header line, a line saying that the status keeps only that many, then SHARD POD LOAD SHARE.
// Without status.load, only the header line; with no shard measured busy, a line saying so.
std::string formatTopShards(const sharding::ShardMap& map);

}  // namespace kshard::tools
