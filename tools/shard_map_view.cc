#include "tools/shard_map_view.h"

#include <algorithm>
#include <optional>
#include <sstream>
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

// "1.23" for digits = 2.
std::string fixed(double value, int digits) {
  std::ostringstream out;
  out.precision(digits);
  out << std::fixed << value;
  return out.str();
}

// A load as printed: "0.412"; "-" when unknown.
std::string loadCell(std::optional<double> load) { return load ? fixed(*load, 3) : "-"; }

// `load` as a percentage of the map's total load: "41.2%"; "-" when either is unknown or the total
// is zero.
std::string shareCell(std::optional<double> load, const sharding::ShardMap& map) {
  const std::optional<sharding::LoadStatus>& status = map.status.load;
  if (!load || !status || !(status->total > 0)) return "-";
  return fixed(100 * *load / status->total, 1) + "%";
}

// "demo/counter: balance load, peak-to-mean 1.23 (tolerance 1.10, hottest-shard bound 1.05),
// total load 2.340", or "...: balance load; the pods have not reported their load yet".
std::string loadHeadline(const sharding::ShardMap& map) {
  std::string out = map.metadata.namespace_ + "/" + map.metadata.name + ": balance " +
                    std::string(sharding::balanceName(map.spec.balance));
  const std::optional<sharding::LoadStatus>& load = map.status.load;
  if (!load) return out + "; the pods have not reported their load yet (no status.load)\n";
  out += ", peak-to-mean " + fixed(load->peakToMean, 2) + " (";
  if (map.spec.balance == sharding::Balance::kLoad) {
    out += "tolerance " + fixed(1 + map.spec.loadTolerance, 2) + ", ";
  }
  return out + "hottest-shard bound " + fixed(load->bound, 2) + "), total load " +
         fixed(load->total, 3) + "\n";
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

StatusOr<std::string> formatTopPods(const sharding::ShardMap& map) {
  StatusOr<sharding::ShardTable> table = tableOf(map);
  if (!table.ok()) return table.status();
  const std::vector<sharding::RegisteredPod>& pods = map.status.pods;
  std::vector<std::size_t> order(pods.size());
  for (std::size_t p = 0; p < order.size(); ++p) order[p] = p;
  // Busiest first; unknown loads last; registration order among equals.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return pods[a].load.value_or(-1) > pods[b].load.value_or(-1);
  });
  std::vector<std::vector<std::string>> cells{{"NAME", "SHARDS", "LOAD", "SHARE"}};
  for (const std::size_t p : order) {
    const sharding::ShardSet owned = table->shardsOf(static_cast<sharding::PodIndex>(p));
    cells.push_back({pods[p].name, std::to_string(owned.size()), loadCell(pods[p].load),
                     shareCell(pods[p].load, map)});
  }
  return loadHeadline(map) + alignColumns(cells);
}

std::string formatTopShards(const sharding::ShardMap& map) {
  std::string out = loadHeadline(map);
  if (!map.status.load) return out;
  std::vector<sharding::ShardLoadReport> hottest = map.status.load->hottest;
  std::stable_sort(hottest.begin(), hottest.end(),
                   [](const sharding::ShardLoadReport& a, const sharding::ShardLoadReport& b) {
                     return a.load > b.load;
                   });
  if (hottest.empty()) return out + "no shard has measured any load\n";
  out += "the " + std::to_string(hottest.size()) + " hottest shards (the status keeps only the " +
         std::to_string(sharding::kHottestShards) + " hottest)\n";
  std::vector<std::vector<std::string>> cells{{"SHARD", "POD", "LOAD", "SHARE"}};
  for (const sharding::ShardLoadReport& h : hottest) {
    cells.push_back({std::to_string(h.shard), h.pod.empty() ? "-" : h.pod, loadCell(h.load),
                     shareCell(h.load, map)});
  }
  return out + alignColumns(cells);
}

}  // namespace kshard::tools
