// The ShardMap resource as the API server serves it (sharding/shard_map_json.h) and the owner
// table read from its status (sharding/shard_map.h): both sidecars and the operator trust what
// they decode here to keep one owner per shard.
//
// Checks: a decoded map re-encodes and decodes to an equal value (the encoded text included); a
// status the table accepts has unique pod names, assignments only to listed pods and no shard
// claimed twice or both assigned and unassigned (a reference count over the status), and writing
// the table back into the status and reading it again gives the same owners and epochs.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "sharding/shard_map.h"
#include "sharding/shard_map_json.h"

namespace kshard::fuzz {
namespace {

using namespace sharding;

// Whether the status keeps one owner per shard, counted here without shard_map.cc.
bool referenceConsistent(const ShardMapStatus& status, std::int32_t shardCount) {
  std::set<std::string> names;
  for (const RegisteredPod& p : status.pods) {
    if (!names.insert(p.name).second) return false;
  }
  std::vector<int> claims(static_cast<std::size_t>(shardCount) + 1, 0);
  for (const Assignment& a : status.assignments) {
    if (!names.contains(a.pod)) return false;
    bool twice = false;
    a.shards.forEach([&](ShardId s) { twice = twice || ++claims[static_cast<std::size_t>(s)] > 1; });
    if (twice) return false;
  }
  bool both = false;
  status.unassigned.forEach([&](ShardId s) { both = both || claims[static_cast<std::size_t>(s)] > 0; });
  return !both;
}

void checkTable(const ShardMap& map) {
  const std::int32_t count = map.spec.shards;
  StatusOr<ShardTable> table = shardTableFromStatus(map.status, count);
  check(table.ok() == referenceConsistent(map.status, count),
        "the owner table accepts exactly the statuses with one owner per shard",
        table.ok() ? "" : table.status().message());
  if (!table.ok()) return;
  for (const Assignment& a : map.status.assignments) {
    PodIndex index = 0;
    while (map.status.pods[static_cast<std::size_t>(index)].name != a.pod) ++index;
    a.shards.forEach([&](ShardId s) {
      check(table->owner(s) == index && table->epoch(s) == a.epoch,
            "each shard is owned by its assignment's pod at its epoch");
    });
  }
  map.status.unassigned.forEach(
      [&](ShardId s) { check(table->owner(s) == kNoPod, "unassigned shards have no owner"); });

  ShardMapStatus written = map.status;
  writeShardTable(*table, written);
  check(written.podCount == static_cast<std::int32_t>(written.pods.size()), "podCount is derived");
  check(written.unassignedCount == written.unassigned.size(), "unassignedCount is derived");
  StatusOr<ShardTable> reread = shardTableFromStatus(written, count);
  check(reread.ok() && *reread == *table, "writeShardTable then shardTableFromStatus is identity");
}

}  // namespace

int fuzzOneShardMapJson(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<ShardMap> map = parseShardMap(text);
  if (!map.ok()) {
    check(!map.status().message().empty(), "a decode error names the problem");
    return 0;
  }
  check(map->spec.shards >= kMinShardCount && map->spec.shards <= kMaxShardCount,
        "spec.shards is in range", text);
  check(validateSpec(map->spec).ok(), "a decoded spec is valid", text);

  const std::string encoded = toJson(*map).dump();
  StatusOr<ShardMap> again = parseShardMap(encoded);
  check(again.ok(), "an encoded map decodes", again.ok() ? encoded : again.status().message());
  check(*again == *map, "decode(encode(map)) == map", encoded);
  check(toJson(*again).dump() == encoded, "encoding is stable", encoded);

  checkTable(*map);
  return 0;
}

}  // namespace kshard::fuzz
