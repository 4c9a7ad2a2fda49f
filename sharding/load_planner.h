// The load planner: which shards move where in one periodic round, by what the shards cost
// (their measured load) rather than by their count. A pure function of its input, like the count
// planner (sharding/planner.h), whose moves it produces and whose rules on
// pods it keeps: only ready, non-terminating pods of the newest version receive; nothing moves
// while registered pods run different versions; a pod that gave a shard in a round takes none in
// it; the operator unassigns before it assigns.
//
// One round, with L(p) the summed load of pod p's shards and mean = total load / registered pods:
//   1. The receivers' cap is C = (1 + tolerance) x mean. Pod p's target is T(p) = max(C, h(p)),
//      where h(p) is the load of p's hottest shard: a shard cannot be split, so p cannot go below
//      it, and the hottest shard of all bounds every placement's peak (`bound` in LoadSummary).
//   2. Donors are the pods with L(p) > T(p), most loaded first. For each donor, while it is above
//      its target and the round's budget lasts: the receiver is the least loaded pod that can
//      receive; the candidates are the donor's shards that keep the receiver at or below C,
//      carry load, are not withheld (PlanningInput::withheld) and have not moved in the last
//      `cooldownRounds` rounds. Of those, the heaviest that takes the donor no lower than the
//      mean, else the lightest (the one that overshoots least). No candidate: the donor is left
//      for a later round.
//   3. The budget is periodicReceiveCap(shards, rebalanceRate) moves in the round, in all.
//
// Hysteresis: a move never takes its receiver above C <= its target, so a pod that received never
// becomes a donor from that, and a map with every pod at or below its target is left alone; the
// cooldown keeps a shard whose load swings from moving back and forth. Shards with no load never
// move. One hot shard exempts only its own pod: the others still even out below C.
//
// Unassigned shards are not placed here: with any, the round decides nothing, and the count
// planner's placement round places them (their load is unknown until someone serves them).
// Deterministic: ties go to the pod registered first and the lower shard id.
//
// Cost: O(shards + pods log pods + donors' shards x log shards + moves x log pods).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "sharding/planner.h"

namespace kshard::sharding {

struct LoadPlanningInput {
  // Pods, owners and rebalanceRate as for the count planner; `immediate` must be false.
  PlanningInput base;
  // load[shard - 1] >= 0: what the shard costs, in any unit (messages or busy seconds per second).
  std::vector<double> load;
  // roundsSinceMoved[shard - 1]: rounds since the shard last moved; empty: long ago for all.
  std::vector<std::int32_t> roundsSinceMoved;
  double tolerance = 0.10;          // (0, 10]: a pod is overloaded above (1 + tolerance) x mean
  std::int32_t cooldownRounds = 3;  // >= 0
  // >= 0: with a mean pod load at or below it nothing moves (near-idle noise is not worth a
  // handoff).
  double minMeanLoad = 0;
};

// The spread of load over the pods that hold shards: peak and mean of the pods' loads, and the
// lowest peak-to-mean any placement could reach (the hottest shard's load over the mean, at least
// 1). Pods with no shard count toward the mean.
struct LoadSummary {
  double mean = 0;
  double peak = 0;
  double peakToMean = 1;  // 1 when there is no load at all
  double bound = 1;
};

// Each pod's load: the summed load of the shards it owns (owners[shard - 1], kNoPod for none).
// Shards beyond either list are not counted.
std::vector<double> podLoads(const std::vector<PodIndex>& owners, std::size_t podCount,
                             const std::vector<double>& load);

LoadSummary summarizeLoad(const std::vector<PodIndex>& owners, std::size_t podCount,
                          const std::vector<double>& load);

// The moves of one round, in the order decided. InvalidArgument as the count planner's decide(),
// and for load or roundsSinceMoved of the wrong size, a negative or non-finite load, an immediate
// round, a tolerance outside (0, 10] or a negative cooldown.
[[nodiscard]] StatusOr<std::vector<Move>> decideByLoad(const LoadPlanningInput& input);

}  // namespace kshard::sharding
