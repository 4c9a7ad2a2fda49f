// The decisions of one rebalance round, as pure functions (DESIGN.md "Rebalance"). The
// controller (shard_map_controller.h) does the I/O between them:
//
//   planningInput --planner--> moves --ping--> planRound --unassign--> commitRound
//       --persist--> assign
//
// Keeping them pure lets the tests pin each decision without pods or a store, and keeps every
// rule that protects "one owner per shard" in one place with its reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "protocol/wire.h"
#include "sharding/planner.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

using sharding::Move;
using sharding::PodIndex;
using sharding::ShardId;
using Shards = std::vector<ShardId>;  // ascending
using ShardsByPod = std::map<PodIndex, Shards>;

// What the controller knows of a registered pod beyond status.pods.
struct PodRuntime {
  bool reachable = true;     // its sidecar answered the operator at the last contact
  bool terminating = false;  // the API shows a deletionTimestamp: draining
  bool leaving = false;      // an unregister is in progress
};

// The planner's input for `map`, whose owners are `table`. A pod can receive shards only when it
// is reachable, not terminating and not leaving (the planner adds: newest version, not a donor).
sharding::PlanningInput planningInput(const sharding::ShardMap& map,
                                      const sharding::ShardTable& table,
                                      const std::vector<PodRuntime>& pods, bool immediate);

// The pods a round pings: both ends of every move, and every pod when `all` (periodic rounds and
// takeover: their ping answers reconcile what pods hold with the map, epoch rule 4).
std::vector<PodIndex> podsToPing(const std::vector<Move>& moves, std::int32_t podCount, bool all);

struct PingOutcome {
  enum class State { kNotPinged, kFailed, kAnswered };
  State state = State::kNotPinged;
  Shards held;  // what the pod says it owns (kAnswered only)
  // The measured load of the shards it listed (kAnswered only; shard_loads.h). `reportsLoad`:
  // the answer carried the field (a sidecar of an older release does not measure load).
  std::vector<std::pair<ShardId, double>> load;
  bool reportsLoad = false;
};

struct RoundPlan {
  std::vector<Move> moves;    // moves whose pods both answered the ping
  std::vector<Move> dropped;  // moves that touch a pod that failed the ping
  // Per pod, the shards to unassign: sources of the moves, and strays (epoch rule 4).
  ShardsByPod unassign;
  // Strays: shards a pod holds that the map does not give it. It must stop serving them: another
  // pod may own them. (A subset of `unassign`, kept for logs and metrics.)
  ShardsByPod strays;
  // Shards the map gives a pod that it does not hold (an assign that was lost or timed out), or
  // every shard it is given when the round re-sends all (takeover): assigned again after persist.
  ShardsByPod resend;
};

// Reconciles the moves with the ping answers. `pings` is indexed by PodIndex.
RoundPlan planRound(const sharding::ShardTable& table, std::vector<Move> moves,
                    const std::vector<PingOutcome>& pings, bool resendAll);

struct RoundCommit {
  sharding::ShardTable table;   // the owners to persist
  std::vector<Move> applied;    // moves whose source released the shard (or that had none)
  std::vector<Move> abandoned;  // moves whose source failed the unassign: the shard stays
  // Whether the round writes the status. True when owners change, and also when any unassign
  // was sent even if every move was dropped (epoch rule 3): the unassign fenced its shards at
  // currentEpoch + 1, so every later assign must carry at least that epoch.
  bool persist = false;
  // The epoch the assigns carry: currentEpoch + 1 when persisting, else currentEpoch.
  std::int64_t epoch = 0;
  // Per pod, the shards to assign after the persist: applied moves' targets, re-sends still given
  // by the new table, and the shards of abandoned moves back to their source (the map still gives
  // them to it; a source that released them after a late answer takes them back).
  ShardsByPod assign;
};

// The outcome of the unassign step. `unassignFailed` are the pods whose unassign failed; the
// moves out of them are abandoned. Moves land at the new epoch (epoch rule 1: each group carries
// the epoch at which its pod got the shards).
// `mustPersist`: an unassign at currentEpoch + 1 went out earlier without being persisted (a
// failed write, an unregister whose unassign failed); this round persists to cover it.
RoundCommit commitRound(const sharding::ShardTable& table, std::int64_t currentEpoch,
                        const RoundPlan& plan, const std::set<PodIndex>& unassignFailed,
                        bool mustPersist = false);

// Reads a ping's answer from registered pod `pod` into `out` (kAnswered with what it holds, or
// kFailed). Returns what failed, empty when it answered. Pod IPs are reused, and sidecars
// restart: an answer from another pod, uid or incarnation is a failure.
std::string readPing(const sharding::RegisteredPod& pod,
                     const StatusOr<protocol::PingResponse>& answer, std::int32_t shardCount,
                     PingOutcome& out);

// How a round that ended with `result` ("idle", "moved", "partial", "conflict", "failed",
// "aborted") counts and what follows it.
struct RoundEnd {
  std::int64_t moved = 0;  // shards moved: the applied moves of a round that got past persist
  bool failed = false;     // a step failed: the conditions show a retry pending
  std::optional<Duration> retryIn;  // when the next round retries (none: the periodic one)
};
// `applied`: the commit's applied moves, when the round got that far. `conflictsInARow` counts
// this round when it met a Conflict: the first is retried at once, later ones back off.
RoundEnd roundEnd(std::string_view result, std::optional<std::size_t> applied, int conflictsInARow,
                  Duration retryInterval);

// Shard counts differ by at most one between the registered pods (true with no pods).
bool balancedWithinOne(const std::vector<std::int32_t>& counts);

}  // namespace kshard::manager
