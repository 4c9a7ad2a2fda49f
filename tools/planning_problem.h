// PlanningProblem: the JSON form of a planner input that `kshardctl plan` reads, and the JSON form
// of the planner's decision it prints.
//
//   {"shards": 4,
//    "pods": [{"name": "p1", "version": "1.0.0"},
//             {"name": "p2", "version": "1.0.0", "ready": true, "terminating": false}],
//    "assignments": {"p1": "1-3", "p2": "4"},
//    "immediate": false, "rebalanceRate": 1.0, "seed": 7}
//
// Pods are listed in registration order; shards in no pod's ranges are unassigned. Optional
// fields default to: ready true, terminating false, assignments {} (all unassigned), immediate
// false, rebalanceRate 0.02 (the ShardMap default, so `plan` predicts the operator's periodic
// round), seed 0. Unknown fields are ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sharding/planner.h"

namespace kshard::tools {

inline constexpr double kDefaultPlanRebalanceRate = 0.02;

struct PlanningProblem {
  sharding::PlanningInput input;
  std::vector<std::string> podNames;  // podNames[i] is the name of input.pods[i]
  std::uint64_t seed = 0;
};

// InvalidArgument with one line naming the problem: invalid JSON, a missing field, a wrong type,
// duplicate pod names, an unknown pod in assignments, a shard in two pods' ranges, shards out of
// range, rebalanceRate outside (0, 1].
[[nodiscard]] StatusOr<PlanningProblem> parsePlanningProblem(std::string_view json);

// {"moves": [{"shard": 2, "from": "p1", "to": "p2"}]} on one line, moves in decision order,
// "from": null for a shard that was unassigned.
std::string formatMoves(const std::vector<sharding::Move>& moves,
                        const std::vector<std::string>& podNames);

}  // namespace kshard::tools
