#include "operator/shard_map_conditions.h"

#include <algorithm>
#include <vector>

#include "operator/round_plan.h"

namespace kshard::manager {
namespace {

sharding::Condition condition(const char* type, bool ok, std::string reason, std::string message,
                              const ConditionFacts& facts) {
  return {type,      ok ? "True" : "False", facts.generation,
          facts.now, std::move(reason),     std::move(message)};
}

bool mixedVersions(const std::vector<sharding::RegisteredPod>& pods) {
  return std::any_of(pods.begin(), pods.end(), [&](const sharding::RegisteredPod& p) {
    return p.version != pods.front().version;
  });
}

}  // namespace

bool updateConditions(sharding::ShardMapStatus& status, const ConditionFacts& facts) {
  bool changed = status.observedGeneration != facts.generation;
  status.observedGeneration = facts.generation;

  const auto unassigned = std::to_string(status.unassignedCount);
  sharding::Condition ready =
      status.pods.empty()
          ? condition(sharding::kConditionReady, false, "NoPods", "no pod has registered", facts)
      : status.unassignedCount > 0 ? condition(sharding::kConditionReady, false, "ShardsUnassigned",
                                               unassigned + " shards have no owner", facts)
                                   : condition(sharding::kConditionReady, true, "AllShardsAssigned",
                                               "every shard is assigned to one of " +
                                                   std::to_string(status.pods.size()) + " pods",
                                               facts);
  changed |= sharding::setCondition(status.conditions, ready);

  std::vector<std::int32_t> counts;
  for (const auto& p : status.pods) counts.push_back(p.shards);
  std::string spread;
  if (!counts.empty()) {
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    spread = "shards per pod: " + std::to_string(*lo) + ".." + std::to_string(*hi);
  }
  sharding::Condition balanced =
      status.pods.empty()
          ? condition(sharding::kConditionBalanced, false, "NoPods", "no pod has registered", facts)
      : balancedWithinOne(counts)
          ? condition(sharding::kConditionBalanced, true, "Balanced", spread, facts)
      : mixedVersions(status.pods)
          ? condition(sharding::kConditionBalanced, false, "RollingUpdate",
                      spread + "; pods run different versions, balancing waits", facts)
          : condition(sharding::kConditionBalanced, false, "Unbalanced", spread, facts);
  changed |= sharding::setCondition(status.conditions, balanced);

  sharding::Condition progressing =
      facts.retryPending
          ? condition(sharding::kConditionProgressing, true, "RetryPending",
                      "a pod failed a step of the last round; it will be retried", facts)
      : facts.movesPending ? condition(sharding::kConditionProgressing, true, "Rebalancing",
                                       "shards are being moved to balance the pods", facts)
                           : condition(sharding::kConditionProgressing, false, "Stable",
                                       "no shard needs to move", facts);
  changed |= sharding::setCondition(status.conditions, progressing);
  return changed;
}

}  // namespace kshard::manager
