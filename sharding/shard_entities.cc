#include "sharding/shard_entities.h"

#include <algorithm>

#include "base/sha256.h"
#include "sharding/json_field_reader.h"
#include "sharding/shard_map.h"

namespace kshard::sharding {
namespace {

using nlohmann::json;

// A record's name: the map's name, at most this long (a shard number and the digest fit after it
// within the 253 characters of an object name), then, when it was cut, "-" and this many hex
// digits of the whole name's SHA-256.
constexpr std::size_t kNamePrefix = 200;
constexpr std::size_t kNameDigits = 10;
// Per entity in maxBytes, beyond its type and id: what {"type":"","id":""}, costs.
constexpr std::size_t kEntityOverhead = 24;

}  // namespace

std::size_t entityBytes(const RememberedEntity& entity) {
  return entity.type.size() + entity.id.size() + kEntityOverhead;
}

std::string shardEntitiesName(std::string_view shardMap, ShardId shard) {
  std::string name(shardMap);
  if (name.size() > kNamePrefix) {
    name.resize(kNamePrefix);
    // A name part ends with a letter or digit: "a.-1" is not an object name.
    while (!name.empty() && (name.back() == '.' || name.back() == '-')) name.pop_back();
    name += "-" + sha256Hex(shardMap).substr(0, kNameDigits);
  }
  return name + "-" + std::to_string(shard);
}

json shardEntitiesObject(const ShardMapOwner& owner, const ShardEntities& record,
                         std::string_view resourceVersion) {
  json entities = json::array();
  for (const RememberedEntity& e : record.entities) {
    entities.push_back({{"type", e.type}, {"id", e.id}});
  }
  json metadata = {{"name", shardEntitiesName(owner.name, record.shard)},
                   {"namespace", owner.ns},
                   {"labels", {{kShardMapLabel, owner.name}}}};
  // The owner reference makes the garbage collector delete the records with their ShardMap.
  if (!owner.uid.empty()) {
    metadata["ownerReferences"] = json::array({{{"apiVersion", kShardMapApiVersion},
                                                {"kind", kShardMapKind},
                                                {"name", owner.name},
                                                {"uid", owner.uid}}});
  }
  if (!resourceVersion.empty()) metadata["resourceVersion"] = resourceVersion;
  return {{"apiVersion", kShardMapApiVersion},
          {"kind", kShardEntitiesKind},
          {"metadata", std::move(metadata)},
          {"spec",
           {{"shardMap", record.shardMap},
            {"shard", record.shard},
            {"epoch", record.epoch},
            {"entities", std::move(entities)}}}};
}

StatusOr<ShardEntities> shardEntitiesFromJson(const json& object) {
  JsonFieldReader root(object, "");
  const json* spec = root.optionalObject("spec");
  if (!root.ok()) return root.status();
  if (spec == nullptr) return invalidArgument("spec: is required");
  JsonFieldReader r(*spec, "spec");
  ShardEntities out;
  out.shardMap = r.requiredString("shardMap");
  out.shard = static_cast<ShardId>(r.requiredInt("shard", kMinShardCount, kMaxShardCount));
  out.epoch = r.requiredInt("epoch", 0, INT64_MAX);
  if (const json* entities = r.optionalArray("entities")) {
    out.entities.reserve(entities->size());
    for (std::size_t i = 0; i < entities->size() && r.ok(); ++i) {
      JsonFieldReader e((*entities)[i], JsonFieldReader::elementPath(r.pathOf("entities"), i));
      RememberedEntity entity{e.requiredString("type"), e.requiredString("id")};
      if (!e.ok()) return e.status();
      if (entity.type.empty() || entity.id.empty()) {
        return invalidArgument(JsonFieldReader::elementPath(r.pathOf("entities"), i) +
                               ": type and id must not be empty");
      }
      out.entities.push_back(std::move(entity));
    }
  }
  if (!r.ok()) return r.status();
  std::sort(out.entities.begin(), out.entities.end());
  out.entities.erase(std::unique(out.entities.begin(), out.entities.end()), out.entities.end());
  return out;
}

}  // namespace kshard::sharding
