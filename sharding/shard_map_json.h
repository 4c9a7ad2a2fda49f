// JSON codec of the ShardMap resource, as the Kubernetes API serves and stores it.
//
// Field names are exactly those of DESIGN.md (camelCase); durations are Kubernetes duration
// strings ("20s", "1m30s"); shard sets use the range form ("1-120,151-180"). Decoding validates
// everything and fails with the path of the first bad field, e.g.
// "spec.rebalanceRate: must be > 0 and <= 1" or "status.assignments[3].shards: part \"0\" is
// outside 1..300". Absent spec fields take DESIGN.md's defaults; unknown fields are ignored.
// Encoding writes every spec field (defaults included) so the stored object is explicit.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "sharding/shard_map.h"

namespace kshard::sharding {

nlohmann::json toJson(const ShardMapSpec& spec);
nlohmann::json toJson(const ShardMapStatus& status);
// The whole resource: apiVersion, kind, metadata, spec, status.
nlohmann::json toJson(const ShardMap& shardMap);

// Errors name fields from the resource root: "spec.shards: is required".
[[nodiscard]] StatusOr<ShardMapSpec> specFromJson(const nlohmann::json& json);
// Shard sets are checked against 1..shardCount (the spec's shard count).
[[nodiscard]] StatusOr<ShardMapStatus> statusFromJson(const nlohmann::json& json,
                                                      std::int32_t shardCount);
// A resource without a status (just created) decodes with an empty status. A segmented one
// (status.segments, sharding/shard_map_segments.h) is FailedPrecondition: assemble it first, or
// decode withoutSegments() when the pods and assignments do not matter.
[[nodiscard]] StatusOr<ShardMap> shardMapFromJson(const nlohmann::json& json);
// Parses text first; invalid JSON is an InvalidArgument naming the byte offset.
[[nodiscard]] StatusOr<ShardMap> parseShardMap(std::string_view text);

}  // namespace kshard::sharding
