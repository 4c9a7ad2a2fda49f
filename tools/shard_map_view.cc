#include "tools/shard_map_view.h"

#include <algorithm>
#include <utility>

#include "sharding/shard_id.h"

namespace kshard::tools {
namespace {

// Left-aligned columns, two spaces apart, as kubectl prints tables.
std::string alignColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

// The owners of the map's shards; FailedPrecondition for a status that breaks "one owner per
// shard" (the operator never writes one).
StatusOr<sharding::ShardTable> tableOf(const sharding::ShardMap& map) {
  StatusOr<sharding::ShardTable> table =
      sharding::shardTableFromStatus(map.status, map.spec.shards);
  if (!table.ok()) return failedPrecondition("inconsistent status: " + table.status().message());
  return table;
}

}  // namespace

StatusOr<std::vector<OwnerRow>> ownersOf(const sharding::ShardMap& map,
                                         const std::vector<std::string>& ids) {
  const std::int32_t shards = map.spec.shards;
  StatusOr<sharding::ShardTable> table = tableOf(map);
  if (!table.ok()) return table.status();
  std::vector<OwnerRow> rows;
  for (const std::string& id : ids) {
    StatusOr<sharding::ShardId> shard = sharding::shardIdOf(id, shards);
    if (!shard.ok()) return invalidArgument("entity \"" + id + "\": " + shard.status().message());
    OwnerRow row{id, *shard, "", "", 0};
    if (const sharding::PodIndex owner = table->owner(*shard); owner != sharding::kNoPod) {
      const sharding::RegisteredPod& pod = map.status.pods[static_cast<std::size_t>(owner)];
      row.pod = pod.name;
      row.version = pod.version;
      row.epoch = table->epoch(*shard);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string formatOwners(const std::vector<OwnerRow>& rows) {
  std::vector<std::vector<std::string>> cells{{"ENTITY", "SHARD", "POD", "VERSION", "EPOCH"}};
  for (const OwnerRow& r : rows) {
    const bool owned = !r.pod.empty();
    cells.push_back({r.entity, std::to_string(r.shard), owned ? r.pod : "<unassigned>",
                     owned ? r.version : "-", owned ? std::to_string(r.epoch) : "-"});
  }
  return alignColumns(cells);
}

StatusOr<std::string> formatMap(const sharding::ShardMap& map) {
  StatusOr<sharding::ShardTable> table = tableOf(map);
  if (!table.ok()) return table.status();
  std::string out = map.metadata.namespace_ + "/" + map.metadata.name + ": " +
                    std::to_string(map.spec.shards) + " shards, epoch " +
                    std::to_string(map.status.epoch) + ", manager " +
                    (map.status.manager ? map.status.manager->pod : std::string("<none>")) + "\n";
  std::vector<std::vector<std::string>> cells{{"POD", "VERSION", "SHARDS", "RANGES"}};
  for (std::size_t p = 0; p < map.status.pods.size(); ++p) {
    const sharding::ShardSet owned = table->shardsOf(static_cast<sharding::PodIndex>(p));
    const sharding::RegisteredPod& pod = map.status.pods[p];
    cells.push_back({pod.name, pod.version, std::to_string(owned.size()),
                     owned.size() == 0 ? "-" : owned.toString()});
  }
  const sharding::ShardSet unassigned = table->unassigned();
  cells.push_back({"<unassigned>", "-", std::to_string(unassigned.size()),
                   unassigned.size() == 0 ? "-" : unassigned.toString()});
  return out + alignColumns(cells);
}

}  // namespace kshard::tools
