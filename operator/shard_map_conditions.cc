#include "operator/shard_map_conditions.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "operator/round_plan.h"
#include "operator/shard_loads.h"

namespace kshard::manager {
namespace {

sharding::Condition condition(const char* type, bool ok, std::string reason, std::string message,
                              const ConditionFacts& facts, std::string status = "") {
  if (status.empty()) status = ok ? "True" : "False";
  return {type,      std::move(status),  facts.generation,
          facts.now, std::move(reason), std::move(message)};
}

bool mixedVersions(const std::vector<sharding::RegisteredPod>& pods) {
  return std::any_of(pods.begin(), pods.end(), [&](const sharding::RegisteredPod& p) {
    return p.version != pods.front().version;
  });
}

// "1.23" for a figure of status.load.
std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

sharding::Condition balancedCondition(const sharding::ShardMapStatus& status,
                                      const ConditionFacts& facts) {
  if (status.pods.empty()) {
    return condition(sharding::kConditionBalanced, false, "NoPods", "no pod has registered",
                     facts);
  }
  std::string spread;
  bool ok = false;
  std::string reason = "Balanced";
  if (const auto tolerance = facts.loadTolerance) {
    if (!status.load) {
      return condition(sharding::kConditionBalanced, false, "LoadUnknown",
                       "balancing by load; the pods have not reported their load yet", facts,
                       "Unknown");
    }
    spread = "busiest pod at " + figure(status.load->peakToMean) + " x the mean load (tolerance " +
             figure(1 + *tolerance) + ", hottest shard's bound " + figure(status.load->bound) +
             ")";
    ok = loadWithinTolerance(*status.load, *tolerance);
    reason = "LoadBalanced";
  } else {
    std::vector<std::int32_t> counts;
    for (const auto& p : status.pods) counts.push_back(p.shards);
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    spread = "shards per pod: " + std::to_string(*lo) + ".." + std::to_string(*hi);
    ok = balancedWithinOne(counts);
  }
  if (ok) return condition(sharding::kConditionBalanced, true, reason, spread, facts);
  if (mixedVersions(status.pods)) {
    return condition(sharding::kConditionBalanced, false, "RollingUpdate",
                     spread + "; pods run different versions, balancing waits", facts);
  }
  return condition(sharding::kConditionBalanced, false,
                   facts.loadTolerance ? "LoadUnbalanced" : "Unbalanced", spread, facts);
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

  changed |= sharding::setCondition(status.conditions, balancedCondition(status, facts));

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
