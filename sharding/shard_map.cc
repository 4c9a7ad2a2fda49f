#include "sharding/shard_map.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <string_view>
#include <unordered_map>

#include "base/enum_names.h"
#include "base/utf8.h"

namespace kshard::sharding {
namespace {

Status requirePositive(Duration d, std::string_view field) {
  if (d > Duration::zero()) return {};
  return invalidArgument("spec." + std::string(field) + ": must be > 0");
}

constexpr std::pair<Balance, std::string_view> kBalanceNames[] = {{Balance::kCount, "count"},
                                                                  {Balance::kLoad, "load"}};

// A list field of names (spec.rememberedEntityTypes, spec.singletons): at most `maxItems` of
// them (`noun` in the message), each 1..maxBytes bytes of UTF-8, none twice.
Status validateNames(const std::vector<std::string>& names, const std::string& field,
                     std::size_t maxItems, std::string_view noun, std::size_t maxBytes) {
  if (names.size() > maxItems) {
    return invalidArgument(field + ": at most " + std::to_string(maxItems) + " " +
                           std::string(noun));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string item = field + "[" + std::to_string(i) + "]";
    const std::string& name = names[i];
    if (name.empty()) return invalidArgument(item + ": must not be empty");
    if (name.size() > maxBytes) {
      return invalidArgument(item + ": longer than " + std::to_string(maxBytes) + " bytes");
    }
    if (Status s = validateUtf8(name); !s.ok()) return s.withContext(item);
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), name) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      return invalidArgument(item + ": \"" + name + "\" is listed twice");
    }
  }
  return {};
}

}  // namespace

std::string_view balanceName(Balance b) { return nameIn(kBalanceNames, b, "count"); }

std::optional<Balance> parseBalance(std::string_view text) { return valueIn(kBalanceNames, text); }

Status validateSpec(const ShardMapSpec& spec) {
  if (spec.shards < kMinShardCount || spec.shards > kMaxShardCount) {
    return invalidArgument("spec.shards: must be in " + std::to_string(kMinShardCount) + ".." +
                           std::to_string(kMaxShardCount));
  }
  if (spec.versionLabel.empty()) return invalidArgument("spec.versionLabel: must not be empty");
  // Written so that NaN fails too.
  if (!(spec.rebalanceRate > 0 && spec.rebalanceRate <= 1)) {
    return invalidArgument("spec.rebalanceRate: must be > 0 and <= 1");
  }
  for (auto [d, field] : {std::pair{spec.rebalanceInterval, "rebalanceInterval"},
                          std::pair{spec.rebalanceRetryInterval, "rebalanceRetryInterval"},
                          std::pair{spec.pingTimeout, "pingTimeout"},
                          std::pair{spec.handoffTimeout, "handoffTimeout"},
                          std::pair{spec.sendTimeout, "sendTimeout"},
                          std::pair{spec.handoffBackoff, "handoffBackoff"}}) {
    if (Status s = requirePositive(d, field); !s.ok()) return s;
  }
  if (spec.entityIdleTimeout < Duration::zero()) {
    return invalidArgument("spec.entityIdleTimeout: must be >= 0 (0 = never)");
  }
  if (spec.maxActiveEntitiesPerPod < 0) {
    return invalidArgument("spec.maxActiveEntitiesPerPod: must be >= 0 (0 = no limit)");
  }
  // Renewed every third of it: shorter, a pod would fence itself at the first late answer.
  if (spec.ownershipLease < kMinOwnershipLease) {
    return invalidArgument("spec.ownershipLease: must be at least 3s");
  }
  if (!(spec.loadTolerance > 0 && spec.loadTolerance <= 10)) {
    return invalidArgument("spec.loadTolerance: must be > 0 and <= 10");
  }
  if (spec.handoffFailureLimit < 0 || spec.handoffFailureLimit > kMaxHandoffFailureLimit) {
    return invalidArgument("spec.handoffFailureLimit: must be in 0.." +
                           std::to_string(kMaxHandoffFailureLimit) + " (0 = never throttle)");
  }
  if (Status s = validateNames(spec.rememberedEntityTypes, "spec.rememberedEntityTypes",
                               kMaxRememberedEntityTypes, "types", kMaxEntityTypeBytes);
      !s.ok()) {
    return s;
  }
  return validateNames(spec.singletons, "spec.singletons", kMaxSingletons, "names",
                       kMaxSingletonNameBytes);
}

bool setCondition(std::vector<Condition>& conditions, const Condition& update) {
  auto it = std::find_if(conditions.begin(), conditions.end(),
                         [&](const Condition& c) { return c.type == update.type; });
  if (it == conditions.end()) {
    conditions.push_back(update);
    return true;
  }
  Condition next = update;
  if (it->status == update.status) next.lastTransitionTime = it->lastTransitionTime;
  if (*it == next) return false;
  *it = std::move(next);
  return true;
}

const Condition* findCondition(const std::vector<Condition>& conditions, std::string_view type) {
  auto it = std::find_if(conditions.begin(), conditions.end(),
                         [&](const Condition& c) { return c.type == type; });
  return it == conditions.end() ? nullptr : &*it;
}

ShardTable::ShardTable(std::int32_t shardCount)
    : owner_(static_cast<std::size_t>(std::max(shardCount, 0)), kNoPod),
      epoch_(static_cast<std::size_t>(std::max(shardCount, 0)), 0) {}

void ShardTable::assign(ShardId shard, PodIndex pod, std::int64_t epoch) {
  owner_[static_cast<std::size_t>(shard - 1)] = pod;
  epoch_[static_cast<std::size_t>(shard - 1)] = epoch;
}

void ShardTable::unassign(ShardId shard) { assign(shard, kNoPod, 0); }

void ShardTable::removePod(PodIndex pod) {
  for (std::size_t i = 0; i < owner_.size(); ++i) {
    if (owner_[i] == pod) {
      owner_[i] = kNoPod;
      epoch_[i] = 0;
    } else if (owner_[i] > pod) {
      --owner_[i];
    }
  }
}

std::vector<std::int32_t> ShardTable::shardCounts(std::int32_t podCount) const {
  std::vector<std::int32_t> counts(static_cast<std::size_t>(podCount), 0);
  for (PodIndex p : owner_) {
    if (p != kNoPod) ++counts[static_cast<std::size_t>(p)];
  }
  return counts;
}

ShardSet ShardTable::shardsOf(PodIndex pod) const {
  ShardSet set;
  for (std::size_t i = 0; i < owner_.size(); ++i) {
    if (owner_[i] == pod) set.append(static_cast<ShardId>(i + 1));
  }
  return set;
}

ShardSet ShardTable::unassigned() const { return shardsOf(kNoPod); }

StatusOr<ShardTable> shardTableFromStatus(const ShardMapStatus& status, std::int32_t shardCount) {
  if (shardCount < kMinShardCount || shardCount > kMaxShardCount) {
    return invalidArgument("spec.shards: must be in " + std::to_string(kMinShardCount) + ".." +
                           std::to_string(kMaxShardCount));
  }
  std::unordered_map<std::string_view, PodIndex> podIndex;
  for (std::size_t i = 0; i < status.pods.size(); ++i) {
    if (!podIndex.emplace(status.pods[i].name, static_cast<PodIndex>(i)).second) {
      return invalidArgument("status.pods[" + std::to_string(i) + "].name: duplicate pod \"" +
                             status.pods[i].name + "\"");
    }
  }
  ShardTable table(shardCount);
  // Which assignment entry claimed each shard, to name both entries on a conflict.
  std::vector<std::int32_t> claimedBy(static_cast<std::size_t>(shardCount), -1);
  for (std::size_t i = 0; i < status.assignments.size(); ++i) {
    const Assignment& a = status.assignments[i];
    const std::string field = "status.assignments[" + std::to_string(i) + "]";
    auto pod = podIndex.find(a.pod);
    if (pod == podIndex.end()) {
      return invalidArgument(field + ".pod: \"" + a.pod + "\" is not in status.pods");
    }
    for (const ShardRange& r : a.shards.ranges()) {
      if (r.first < 1 || r.last > shardCount) {
        return invalidArgument(field + ".shards: outside 1.." + std::to_string(shardCount));
      }
      for (ShardId s = r.first; s <= r.last; ++s) {
        std::int32_t& claim = claimedBy[static_cast<std::size_t>(s - 1)];
        if (claim >= 0) {
          return invalidArgument(field + ".shards: shard " + std::to_string(s) +
                                 " is also in status.assignments[" + std::to_string(claim) + "]");
        }
        claim = static_cast<std::int32_t>(i);
        table.assign(s, pod->second, a.epoch);
      }
    }
  }
  for (const ShardRange& r : status.unassigned.ranges()) {
    for (ShardId s = r.first; s <= r.last; ++s) {
      if (s < 1 || s > shardCount || table.owner(s) != kNoPod) {
        return invalidArgument("status.unassigned: shard " + std::to_string(s) +
                               (s < 1 || s > shardCount
                                    ? " is outside 1.." + std::to_string(shardCount)
                                    : " is also assigned"));
      }
    }
  }
  return table;
}

void writeShardTable(const ShardTable& table, ShardMapStatus& status) {
  const auto podCount = static_cast<std::int32_t>(status.pods.size());
  // Per pod, its shards by epoch; shards arrive in ascending order, so append() applies.
  std::vector<std::map<std::int64_t, ShardSet>> byPod(status.pods.size());
  ShardSet unassigned;
  for (ShardId s = 1; s <= table.shardCount(); ++s) {
    const PodIndex p = table.owner(s);
    if (p == kNoPod) {
      unassigned.append(s);
      continue;
    }
    assert(p < podCount && "ShardTable owner outside status.pods");
    byPod[static_cast<std::size_t>(p)][table.epoch(s)].append(s);
  }
  status.assignments.clear();
  for (std::size_t p = 0; p < byPod.size(); ++p) {
    std::int64_t owned = 0;
    for (auto& [epoch, shards] : byPod[p]) {
      owned += shards.size();
      status.assignments.push_back({status.pods[p].name, epoch, std::move(shards)});
    }
    status.pods[p].shards = static_cast<std::int32_t>(owned);
  }
  status.unassignedCount = static_cast<std::int32_t>(unassigned.size());
  status.unassigned = std::move(unassigned);
  status.podCount = podCount;
}

}  // namespace kshard::sharding
