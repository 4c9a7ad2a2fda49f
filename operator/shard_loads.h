// ShardLoads: the load of each shard as the operator knows it, and the decisions that read it
// (spec.balance: load). Pure: the round runner (round_runner.h) feeds it the ping answers of the
// periodic rounds and the moves it applied, and asks it for the load planner's input and for
// status.load.
//
// Where the figures come from: every periodic round pings every pod, and a sidecar's ping answer
// carries the measured load of each shard it owns (sidecar/shard_load.h: the app's busy seconds
// per second, decayed with a one-minute half-life). A shard's load is what its owner last
// reported; a shard whose owner did not answer keeps its last figure, and a shard that moved
// keeps its figure until its new owner has had it for one report. No load is written to the API
// server per shard: status.load carries the summary and the few hottest shards only.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "operator/round_plan.h"
#include "sharding/load_planner.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

// How often the periodic rounds refresh status.load when they write nothing else, and only when
// a figure changed materially (loadMateriallyChanged): every write of the status reaches every
// sidecar that watches the map.
inline constexpr Duration kLoadStatusInterval = std::chrono::seconds(30);
// After the API server dropped status.load (an older CRD), how long before trying again.
inline constexpr Duration kLoadStatusRetry = std::chrono::minutes(10);
// Below this mean pod load (app seconds per second: 0.1 % of one thread) no shard moves for load:
// differences in near-idle noise are not worth a handoff. An app of sub-millisecond turns at a
// few messages a second per pod is above it.
inline constexpr double kMinLoadToBalance = 0.001;
// A shard that moved for load waits at least this long (and three rounds) before it moves
// again: two half-lives of the sidecars' measurement.
inline constexpr Duration kLoadCooldown = std::chrono::minutes(2);

struct ShardLoads {
  std::vector<double> load;  // load[shard - 1]; empty until the first report
  // When each shard last moved (none: not since this replica led), for the planner's cooldown.
  std::vector<std::optional<SteadyTime>> movedAt;
  // Shards that moved since their owner last reported: an owner that does not list one yet keeps
  // its earlier figure for one report.
  std::vector<bool> movedSinceReport;
  bool measured = false;  // some pod has reported its load
  // The pods ("name/uid/incarnation") that reported their load since this replica leads, and
  // those that answered without it (a sidecar of an older release, which would look idle).
  std::set<std::string> reported;
  std::set<std::string> silent;
  std::optional<SteadyTime> statusWritten;  // when status.load was last written
  // When the API server last dropped status.load from a write: the installed CRD predates it.
  std::optional<SteadyTime> statusDropped;
  bool droppedWarned = false;  // an OutdatedCRD Event went out this term
  bool silentWarned = false;   // a LoadNotReported Event went out for the silent pods
};

// What a periodic round of a load map knows of its pods' load.
enum class LoadKnowledge {
  kComplete,    // every registered pod has reported since this replica leads: balance by load
  kWaiting,     // some pod has not answered yet: place unassigned shards only
  kSilentPods,  // some pod answers without load (an older sidecar): balance counts meanwhile
};
LoadKnowledge loadKnowledge(const std::vector<sharding::RegisteredPod>& pods,
                            const ShardLoads& loads);

// Reads the ping answers of a periodic round (`pings[p]` is pod p's, `pods[p]` the pod): each
// pod that answered
// reports the load of the shards it holds that `table` gives it; a shard it holds but does not
// list carries none (unless it just moved). A figure for a shard the map gives another pod, or
// none, is not taken: a sidecar speaks only for its own shards. A pod that answered without
// reporting load changes nothing and makes the round incomplete.
void recordPings(ShardLoads& loads, const sharding::ShardTable& table,
                 const std::vector<sharding::RegisteredPod>& pods,
                 const std::vector<PingOutcome>& pings);
// `applied` moved at `now`: those that had a source wait out the load planner's cooldown (a
// placement is not a move for load).
void recordMoves(ShardLoads& loads, std::int32_t shardCount, const std::vector<Move>& applied,
                 SteadyTime now);

// Whether a periodic round balances by load: spec.balance is load, every shard has an owner (the
// count planner places unassigned shards), and every pod has reported its load (kComplete).
bool balancesByLoad(const sharding::ShardMap& map, const sharding::ShardTable& table,
                    const ShardLoads& loads);
// The load planner's input for a periodic round on `base` (the count planner's input), at `now`
// with rounds every `interval`: the cooldown counts the intervals since each shard moved, at
// least kLoadCooldown's worth, and no move is made below kMinLoadToBalance.
sharding::LoadPlanningInput loadPlanningInput(sharding::PlanningInput base,
                                              const ShardLoads& loads, double tolerance,
                                              SteadyTime now, Duration interval);

// status.load and each pod's load, as `table` places the shards. Figures keep 3 significant
// digits, so that noise below that does not make a write differ; loads below 1e-9 are 0.
void writeLoadStatus(sharding::ShardMapStatus& status, const sharding::ShardTable& table,
                     const ShardLoads& loads);
// Whether a round at `now` may refresh status.load: the pods have reported, the CRD kept the
// field (or kLoadStatusRetry passed since it did not), and the status is written anyway or the
// last refresh is kLoadStatusInterval old.
bool loadStatusDue(const ShardLoads& loads, SteadyTime now, bool writingAnyway);
// Whether `after`'s load figures differ from `before`'s enough to be worth a write of their own:
// peak-to-mean or the bound by 0.05 or more, a pod's load by a tenth of the mean pod load, or
// (given the map's `tolerance` in load mode) the verdict of loadWithinTolerance.
bool loadMateriallyChanged(const sharding::ShardMapStatus& before,
                           const sharding::ShardMapStatus& after,
                           std::optional<double> tolerance);

// Whether status.load shows the pods within the tolerance: peak-to-mean at most
// max(1 + tolerance, bound), with rounding's slack.
bool loadWithinTolerance(const sharding::LoadStatus& load, double tolerance);

}  // namespace kshard::manager
