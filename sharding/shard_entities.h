// The ShardEntities resource (kshard.io/v1alpha1): the remembered entities of one shard of a
// ShardMap (docs/decisions/0019-remembered-entities.md).
//
// One object per (ShardMap, shard), created only once the shard has a remembered entity, named
// `<map>-<shard>`, labelled kshard.io/shard-map and owned by the ShardMap (deleted with it):
//
//   spec: {shardMap: counter, shard: 17, epoch: 42,
//          entities: [{type: consumer, id: orders}, {type: consumer, id: refunds}]}
//
// Only the sidecar that owns the shard writes it, with the resourceVersion it read, and with its
// epoch for the shard: a record whose epoch is newer than a writer's belongs to a newer owner and
// is not written by the older one. The record decides which entities the owner starts without
// a message; it never decides who owns the shard (the ShardMap does).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sharding/shard_id.h"

namespace kshard::sharding {

inline constexpr char kShardEntitiesKind[] = "ShardEntities";

struct RememberedEntity {
  std::string type;
  std::string id;
  friend auto operator<=>(const RememberedEntity&, const RememberedEntity&) = default;
};

struct ShardEntities {
  std::string shardMap;  // the ShardMap's name
  ShardId shard = 0;
  // The epoch of the owner that last wrote it (sidecar/entity_registry.h's fencing token).
  std::int64_t epoch = 0;
  std::vector<RememberedEntity> entities;  // sorted, no duplicates
  friend bool operator==(const ShardEntities&, const ShardEntities&) = default;
};

// What one record may hold: its count of entities, and their types' and ids' bytes (an object
// stays far below the API server's 1.5 MiB).
struct ShardEntitiesLimits {
  std::size_t maxEntities = 1000;
  std::size_t maxBytes = 256 * 1024;
};

// The bytes `entities` count against ShardEntitiesLimits::maxBytes.
std::size_t entityBytes(const RememberedEntity& entity);

// `<map>-<shard>`; a map name too long for that keeps its first part and a digest of the whole,
// so that two maps never share a record's name.
std::string shardEntitiesName(std::string_view shardMap, ShardId shard);

// The ShardMap a record belongs to: its namespace and name, and its uid for the owner reference
// (none when empty, e.g. a map the operator's manager API served without one).
struct ShardMapOwner {
  std::string ns;
  std::string name;
  std::string uid;
};

// The object to create (empty `resourceVersion`) or to update with that version.
nlohmann::json shardEntitiesObject(const ShardMapOwner& owner, const ShardEntities& record,
                                   std::string_view resourceVersion = {});

// A stored object's spec. InvalidArgument naming the field when it is malformed; the entities
// come back sorted and without duplicates.
[[nodiscard]] StatusOr<ShardEntities> shardEntitiesFromJson(const nlohmann::json& object);

}  // namespace kshard::sharding
