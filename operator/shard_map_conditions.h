// The conditions the operator keeps on a ShardMap (metav1.Condition, one owner: the operator):
//
//   Ready        True when at least one pod is registered and every shard has an owner.
//   Balanced     True when the pods' shard counts differ by at most one; with spec.balance
//                load, when status.load shows the busiest pod within the tolerance (or the
//                hottest shard's bound), and Unknown until the pods have reported their load.
//   Progressing  True while shards are still to move: a failed round will be retried, or the
//                next round would move shards (balancing is rate-limited per round).
//
// Each carries the generation it was computed for, so `kubectl wait
// --for=condition=Ready` and dashboards can tell a fresh condition from a stale one. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sharding/shard_map.h"

namespace kshard::manager {

struct ConditionFacts {
  std::int64_t generation = 0;
  bool retryPending = false;  // a pod failed a step of the last round; a retry is scheduled
  bool movesPending = false;  // the next periodic round would move shards
  std::string now;            // RFC 3339: the lastTransitionTime of conditions that change
  // spec.loadTolerance when spec.balance is load: Balanced then reads status.load.
  std::optional<double> loadTolerance;
};

// Sets status.observedGeneration and the three conditions from the status's pods (with their
// shard counts) and unassignedCount. Returns whether anything changed. Transition times change
// only when a condition's status does.
bool updateConditions(sharding::ShardMapStatus& status, const ConditionFacts& facts);

}  // namespace kshard::manager
