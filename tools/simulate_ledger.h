// OwnershipLedger: who owns each shard in a `kshardctl simulate` run, and the figures the run
// reports (moves, placements, rounds, imbalance).
//
// Every simulated shard manager (kshard, Akka, the hash ring) changes ownership only through the
// ledger, so all strategies are counted by the same rules:
//   - A move is a shard getting a new owner when it had an owner before: directly (A -> B), or
//     after being unassigned for a while (A -> none -> B; counted when it is placed on B).
//   - A placement is a shard getting its first owner ever. Placements are not moves.
//   - Unassigning a shard (its pod left) is neither; the placement that follows is the move.
//   - A round is an instant at which ownership changed (commit() after a change; commits at the
//     same simulated time count once). It is one persisted epoch in kshard, the allocations or
//     completed handoffs of one instant in Akka (the coordinator handles each terminated region
//     apart, but they happen together), one table update of the ring.
//   - Imbalance is max - min shards over the serving pods (ready, not terminating, not crashed),
//     sampled at every commit() and sample(); unassigned shards belong to no pod. Pods that do
//     not serve are left out: a draining pod is on its way out whatever it holds.
// The ledger also keeps each pod's shards, so a pod that leaves releases its shards in O(its
// shards), not O(all shards).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "sharding/shard_id.h"

namespace kshard::tools {

// A simulated pod: its creation index in the run (0, 1, ...). Never reused.
using SimPod = std::int32_t;
inline constexpr SimPod kNoSimPod = -1;

// Simulated time since the run began.
using SimTime = std::chrono::nanoseconds;

class OwnershipLedger {
 public:
  explicit OwnershipLedger(std::int32_t shardCount);

  std::int32_t shardCount() const { return static_cast<std::int32_t>(owner_.size()); }
  // kNoSimPod when unassigned.
  SimPod owner(sharding::ShardId shard) const { return owner_[index(shard)]; }
  // The shards `pod` owns, in no particular order. Invalidated by the next change.
  std::span<const sharding::ShardId> shardsOf(SimPod pod) const;
  std::int32_t countOf(SimPod pod) const;
  std::int32_t unassignedCount() const { return unassigned_; }

  // Gives `shard` to `pod` (a move or a placement, see above); nothing when `pod` owns it already.
  void assign(sharding::ShardId shard, SimPod pod);
  // Takes `shard` from its owner; nothing when it is unassigned. Not a change that makes a round:
  // the placement that follows is.
  void release(sharding::ShardId shard);
  // Whether `pod` counts for the imbalance.
  void setServing(SimPod pod, bool serving);

  // Ends a decision at `now`: counts a round when ownership changed since the last commit (once
  // per instant), then samples the imbalance.
  void commit(SimTime now);
  // Samples the imbalance (after a change of serving pods).
  void sample();
  // Forgets the counts so far (the initial placement is not part of a scenario), keeping owners.
  void resetCounters();

  std::int64_t moves() const { return moves_; }
  std::int64_t placements() const { return placements_; }
  std::int64_t rounds() const { return rounds_; }
  std::int32_t maxMovesOfOneShard() const;
  // max - min shards over the serving pods now; 0 with fewer than two serving pods.
  std::int32_t imbalance() const;
  std::int32_t worstImbalance() const { return worstImbalance_; }
  // Time of the last commit() that counted a round; zero when there was none.
  SimTime lastChange() const { return lastChange_; }

 private:
  static std::size_t index(sharding::ShardId shard) { return static_cast<std::size_t>(shard - 1); }
  void grow(SimPod pod);
  void addToPod(sharding::ShardId shard, SimPod pod);
  void removeFromPod(sharding::ShardId shard, SimPod pod);
  void histogramAdd(std::int32_t count, int delta);

  std::vector<SimPod> owner_;
  std::vector<bool> everOwned_;
  std::vector<std::int32_t> movesOf_;
  // Per pod, its shards; posInPod_[shard - 1] is the shard's place in its owner's list.
  std::vector<std::vector<sharding::ShardId>> shardsOf_;
  std::vector<std::int32_t> posInPod_;
  std::vector<bool> serving_;
  // Shard count -> number of serving pods with that count: max and min in O(1).
  std::map<std::int32_t, std::int32_t> servingCounts_;
  std::int32_t unassigned_ = 0;
  std::int64_t moves_ = 0;
  std::int64_t placements_ = 0;
  std::int64_t rounds_ = 0;
  bool changed_ = false;
  std::int32_t worstImbalance_ = 0;
  SimTime lastChange_{0};
};

}  // namespace kshard::tools
