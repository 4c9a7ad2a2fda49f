// ShardLoads: the load of each shard as the operator knows it, and the decisions that read it
// (spec.balance: load). Pure: the round runner (round_runner.h) feeds it the ping answers of the
// periodic rounds and the moves it applied, and asks it for the load planner's input and for
// status.load.
//
// Where the figures come from: every periodic round pings every pod, and a sidecar's ping answer
// carries the measured load of each shard it owns (sidecar/shard_load.h: the app's busy seconds
// per second, decayed with a one-minute half-life). A shard's load is what its owner last
// reported; a shard whose owner did not answer keeps its last figure, and a shard that moves
// keeps its figure until its new owner reports it. No load is written to the API server per
// shard: status.load carries the summary and the few hottest shards only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "operator/round_plan.h"
#include "sharding/load_planner.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

// How often the periodic rounds refresh status.load when they write nothing else: every write of
// the status reaches every sidecar that watches the map.
inline constexpr Duration kLoadStatusInterval = std::chrono::seconds(30);

struct ShardLoads {
  std::vector<double> load;  // load[shard - 1]; empty until the first report
  // movedAt[shard - 1]: the periodic round (periodicRounds' value) in which the shard last moved.
  std::vector<std::int64_t> movedAt;
  std::int64_t periodicRounds = 0;  // periodic rounds whose pings were read
  bool measured = false;            // some pod has reported its load
  std::optional<SteadyTime> statusWritten;  // when status.load was last refreshed
};

// Reads the ping answers of a periodic round (`pings[p]` is pod p's): each pod that answered
// reports the load of the shards it holds that `table` gives it; a shard it holds but does not
// list carries none. A figure for a shard the map gives another pod, or none, is not taken: a
// sidecar speaks only for its own shards. Counts the round.
void recordPings(ShardLoads& loads, const sharding::ShardTable& table,
                 const std::vector<PingOutcome>& pings);
// The round moved `applied`: they wait out the load planner's cooldown.
void recordMoves(ShardLoads& loads, std::int32_t shardCount, const std::vector<Move>& applied);

// Whether a periodic round balances by load: spec.balance is load, every shard has an owner (the
// count planner places unassigned shards), and the pods have reported their load.
bool balancesByLoad(const sharding::ShardMap& map, const sharding::ShardTable& table,
                    const ShardLoads& loads);
// The load planner's input for a periodic round on `base` (the count planner's input).
sharding::LoadPlanningInput loadPlanningInput(sharding::PlanningInput base,
                                              const ShardLoads& loads, double tolerance);

// status.load and each pod's load, as `table` places the shards. Figures keep 3 significant
// digits, so that noise below that does not make a write differ.
void writeLoadStatus(sharding::ShardMapStatus& status, const sharding::ShardTable& table,
                     const ShardLoads& loads);
// Whether a round that ends now refreshes status.load: the pods have reported, and the status is
// written anyway or the last refresh is kLoadStatusInterval old.
bool loadStatusDue(const ShardLoads& loads, SteadyTime now, bool writingAnyway);

// Whether status.load shows the pods within the tolerance: peak-to-mean at most
// max(1 + tolerance, bound), with rounding's slack.
bool loadWithinTolerance(const sharding::LoadStatus& load, double tolerance);

}  // namespace kshard::manager
