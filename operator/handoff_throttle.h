// HandoffThrottle: the repeated-failure throttle (after FiloDB). A shard whose handoff failed
// `spec.handoffFailureLimit` times in a row is not offered by periodic rounds until a backoff
// has passed, so that one entity whose stop keeps failing does not make its pod give up and take
// back the same shard every round (each attempt holds the round for up to handoffTimeout and
// abandons every move out of that pod).
//
// Pure bookkeeping: the round runner (round_runner.h) reports each handoff's outcome and asks
// for the shards to withhold, which the planner receives as PlanningInput::withheld
// (sharding/planner.h decides). What counts:
//   - a failure: a move of the shard whose source's unassign failed (an error, no answer in
//     time, a refusal, or 504 HandoffTimeout naming the shard as still busy; a 504 naming other
//     shards counts only those);
//   - a success: the source released the shard (the move was applied); the count starts over.
// Failures are counted against the pod that failed to release the shard (name and uid): once
// the map gives the shard to anyone else (a drain, a death, a placement), they are forgotten.
//
// Only the moves a periodic round would offer are withheld. Unassigned shards are always
// placed; an unregistering pod's shards leave through the unregister's own unassign, and a dead
// pod's through its removal, neither of which asks the planner: the throttle can delay a move,
// never force one, and never keeps a shard on a pod that must leave.
//
// Kept in memory by the leader: a new leader (or a new term of the same replica) starts with no
// failures counted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

// The longest backoff, however many failures.
inline constexpr Duration kMaxHandoffBackoff = std::chrono::minutes(10);

// How long a shard whose handoff failed `inARow` times waits after its last failure before it
// may be offered again: none below spec.handoffFailureLimit (or with a limit of 0), else
// spec.handoffBackoff x 2^(inARow - limit), at most kMaxHandoffBackoff.
Duration handoffBackoff(std::int32_t inARow, const sharding::ShardMapSpec& spec);

// A shard that enters a backoff with the failure just recorded.
struct ThrottleStart {
  sharding::ShardId shard = 0;
  std::int32_t inARow = 0;
  SteadyTime until{};
  Duration backoff{};
};

class HandoffThrottle {
 public:
  // `shard`'s handoff from `from` failed at `now`. Returns the backoff it enters, when this
  // failure reaches (or passes) the limit.
  std::optional<ThrottleStart> failed(sharding::ShardId shard, const sharding::RegisteredPod& from,
                                      SteadyTime now, const sharding::ShardMapSpec& spec);
  // `shard` was released by its source: its count starts over.
  void succeeded(sharding::ShardId shard) { failures_.erase(shard); }
  // Forgets the failures of every shard that `table` no longer gives the pod that failed it.
  void forgetMoved(const sharding::ShardTable& table,
                   const std::vector<sharding::RegisteredPod>& pods);

  // The planner's PlanningInput::withheld at `now`: the shards in a backoff. Empty when none is.
  std::vector<bool> withheld(std::int32_t shardCount, SteadyTime now,
                             const sharding::ShardMapSpec& spec) const;
  // How many shards are in a backoff at `now`.
  std::size_t throttled(SteadyTime now, const sharding::ShardMapSpec& spec) const;
  // Handoffs of `shard` that failed in a row (0 when none or forgotten).
  std::int32_t failuresOf(sharding::ShardId shard) const;

 private:
  struct Failures {
    std::string pod, uid;  // the pod that failed to release the shard
    std::int32_t inARow = 0;
    SteadyTime last{};  // the last failure
  };
  bool inBackoff(const Failures& f, SteadyTime now, const sharding::ShardMapSpec& spec) const;

  std::map<sharding::ShardId, Failures> failures_;
};

}  // namespace kshard::manager
