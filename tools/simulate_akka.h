// AkkaManager: Akka Cluster Sharding's coordinator with its LeastShardAllocationStrategy, as
// `kshardctl simulate` runs it, modelled on Akka's public documentation.
//
// Two variants:
//   - classic: LeastShardAllocationStrategy(rebalanceThreshold, maxSimultaneousRebalance), as
//     documented up to Akka 2.6.9. Allocation: the region with fewest shards. Rebalance, when
//     fewer than maxSimultaneousRebalance handoffs are in progress: take the region with most
//     shards not being handed off and the region with fewest shards; if the difference exceeds
//     the threshold, hand off min(difference - threshold, threshold, maxSimultaneous - in
//     progress) of the first's shards (the lowest shard ids). No notion of versions.
//   - current: leastShardAllocationStrategy(absoluteLimit, relativeLimit), Akka 2.6.10 and later.
//     Regions are ranked by suitability: not leaving first, then the newest app version, then
//     fewest shards. Allocation: the most suitable region. Rebalance only when no handoff is in
//     progress, every region runs the same app version (a rolling update is not a good time)
//     and no member is unreachable. optimal = ceil(shards / regions), limit =
//     max(1, min(floor(relativeLimit x shards), absoluteLimit)). Phase 1: regions above optimal,
//     in suitability order, offer (count - optimal) of their oldest-allocated shards; the first
//     `limit` are handed off. Phase 2 (phase 1 found none): if regions are at least two below
//     optimal (countBelow = sum of max(0, optimal - 1 - count)), each region at or above optimal,
//     in suitability order, offers one shard; min(countBelow, limit) are handed off.
// Coordinator behaviour modelled (the same for both):
//   - Every shard is requested all the time, so an unallocated shard is allocated as soon as a
//     region can take it, one shard at a time (counts updated after each).
//   - Rebalance runs every rebalanceInterval (Akka's default 10 s), the first one interval after
//     the scenario starts. A handed-off shard stays with its region (and counts there) for
//     `handoffTime`, then is allocated anew. Handoffs started together complete together.
//   - A terminating pod is a leaving member: graceful shutdown hands off all its shards, which
//     are allocated elsewhere when its drain ends (entities stopped); while it drains it takes
//     no shard (it is not among the regions allocation considers) but still counts for
//     rebalance, whose handoffs are in progress meanwhile.
//   - A crashed member is unreachable until its death is noticed (downed); then its region is
//     terminated and its shards allocated at once. A handoff from a crashed region never
//     completes; its shards are reallocated when the region is terminated.
//   - Ties (equal rank) go to the region registered first (Akka's order there is the iteration
//     order of a hash map). Joining members are not modelled: a pod is a region once ready.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "base/scheduler.h"
#include "tools/simulate_manager.h"

namespace kshard::tools {

struct AkkaParams {
  bool classic = false;
  std::int32_t rebalanceThreshold = 1;        // classic
  std::int32_t maxSimultaneousRebalance = 3;  // classic
  std::int32_t absoluteLimit = 20;            // current
  double relativeLimit = 0.1;                 // current
  SimTime rebalanceInterval = std::chrono::seconds(10);
  SimTime handoffTime = std::chrono::seconds(1);
};

class AkkaManager final : public SimulatedManager {
 public:
  AkkaManager(Scheduler& scheduler, OwnershipLedger& ledger, const SimulatedDeployment& deployment,
              AkkaParams params);

  void startWith(const std::vector<SimPod>& pods) override;
  void podReady(SimPod pod) override;
  void podTerminating(SimPod pod) override;
  void podCrashed(SimPod pod) override;
  void podGone(SimPod pod) override;
  bool settled() const override;

  // The shards one rebalance would hand off now, in order (for tests).
  std::vector<sharding::ShardId> rebalance() const;

 private:
  using Key = std::array<std::int64_t, 4>;
  using Ranking = std::set<std::pair<Key, SimPod>>;
  struct Region {
    bool registered = false;
    bool leaving = false;      // graceful shutdown: no allocation to it
    bool unreachable = false;  // crashed, not downed yet
    std::int64_t registration = 0;
    std::int32_t revision = 0;
    // (order, shard): classic orders by shard id, current by allocation order.
    std::set<std::pair<std::int64_t, sharding::ShardId>> shards;
    std::int32_t inProgress = 0;
    Key rankKey{};
    Key availableKey{};
  };

  Region& region(SimPod pod);
  const Region& region(SimPod pod) const;
  void registerRegion(SimPod pod);
  void unrank(SimPod pod);
  void rank(SimPod pod);
  void allocate(sharding::ShardId shard);
  void allocatePending();
  void take(sharding::ShardId shard);
  void setInProgress(sharding::ShardId shard, bool inProgress);
  void terminateRegion(SimPod pod);
  void tick();
  void completeHandoffs(const std::vector<std::pair<sharding::ShardId, std::int64_t>>& handoffs);
  std::vector<sharding::ShardId> rebalanceClassic() const;
  std::vector<sharding::ShardId> rebalanceCurrent() const;
  bool goodTimeToRebalance() const;

  AkkaParams params_;
  std::vector<Region> regions_;  // by SimPod
  // All registered regions by suitability; the active ones (not leaving) for allocation; for the
  // classic rebalance, regions by shards not being handed off.
  Ranking ranked_;
  Ranking active_;
  Ranking available_;
  std::map<std::int32_t, std::int32_t> revisions_;  // revision -> registered regions
  std::int32_t unreachable_ = 0;
  std::set<sharding::ShardId> unallocated_;
  std::vector<bool> inProgress_;             // by shard - 1
  std::vector<std::int64_t> handoffId_;      // by shard - 1: which handoff is current
  std::vector<std::int64_t> allocationKey_;  // by shard - 1: its order key in its region
  std::int32_t totalInProgress_ = 0;
  std::int64_t nextRegistration_ = 0;
  std::int64_t nextAllocation_ = 0;
  std::int64_t nextHandoff_ = 0;
  bool confirmed_ = false;
};

}  // namespace kshard::tools
