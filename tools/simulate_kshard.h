// KshardManager: kshard's operator as `kshardctl simulate` runs it: the real planner
// (sharding::decide, unchanged) driven by the rebalance workflow of DESIGN.md on simulated time.
//
// Model (DESIGN.md, "Rebalance"; what the design leaves open is said here):
//   - Triggers. Immediate rounds on the register of the first pod, on a register while shards
//     are unassigned, on unregister and on a pod's death; periodic rounds every
//     rebalanceInterval, the first one interval after the scenario starts. Rounds run one at a
//     time: triggers during a round are merged into one round that starts when it ends
//     (immediate if any of them was).
//   - A round decides at once. A round that moves shards takes `roundTime` (ping, unassign,
//     persist, assign); its moves take effect together at its end, as one epoch. A round that
//     decides nothing takes no time.
//   - A pod registers when ready (ready, not terminating, its version from the pod). A
//     terminating pod stays registered and keeps its shards (terminating: receives nothing)
//     until it unregisters after its drain; its shards become unassigned and an immediate round
//     places them. A crashed pod is treated the same once its death is noticed.
//   - The unregister hold (the operator's --max-unregister-hold). A terminating pod deleted at d
//     that asks to unregister is told to retry after `unregisterRetryAfter` (it keeps its shards
//     and serves them) while some pod of a strictly newer version (compareVersions) is starting
//     (created, not registered yet, not deleted) and now < d + maxUnregisterHold; so during a
//     rolling update its shards go to a new pod rather than to an old one that leaves next. The
//     operator also caps the hold by the pod's deletion deadline less handoffTimeout,
//     pingTimeout and 2 s; the injector's grace period makes that cap later than d + 60 s, so
//     it is not modelled. maxUnregisterHold 0: no hold. A crash is not an unregister: no hold.
//   - A move that touches a pod that crashed (not yet noticed) or left during the round fails
//     (the ping or the unassign fails); the rest of the round goes through and a retry round
//     follows after rebalanceRetryInterval.
//   - The map is settled when a periodic round after the last change decided nothing.
#pragma once

#include <optional>
#include <vector>

#include "base/random.h"
#include "base/scheduler.h"
#include "sharding/planner.h"
#include "sharding/shard_map.h"
#include "tools/simulate_instant.h"
#include "tools/simulate_manager.h"

namespace kshard::tools {

// The rebalance settings default to a ShardMap's (sharding/shard_map.h), so that the simulated
// operator runs as a map that leaves them unset.
struct KshardParams {
  SimTime rebalanceInterval = sharding::ShardMapSpec{}.rebalanceInterval;
  SimTime rebalanceRetryInterval = sharding::ShardMapSpec{}.rebalanceRetryInterval;
  double rebalanceRate = sharding::ShardMapSpec{}.rebalanceRate;
  SimTime roundTime = std::chrono::seconds(1);
  SimTime maxUnregisterHold = std::chrono::seconds(60);    // 0: never hold
  SimTime unregisterRetryAfter = std::chrono::seconds(1);  // positive
};

class KshardManager final : public SimulatedManager {
 public:
  KshardManager(Scheduler& scheduler, OwnershipLedger& ledger,
                const SimulatedDeployment& deployment, KshardParams params, Random& random);

  void startWith(const std::vector<SimPod>& pods) override;
  void podReady(SimPod pod) override;
  void podTerminating(SimPod pod) override;
  void podCrashed(SimPod pod) override;
  void podGone(SimPod pod) override;
  std::optional<SimTime> holdUnregister(SimPod pod) override;
  bool settled() const override;
  Status error() const override { return error_; }

  // Rounds run so far, including those that decided nothing (for tests).
  std::int64_t roundsRun() const { return roundsRun_; }

 private:
  enum class Trigger { kNone = 0, kPeriodic = 1, kImmediate = 2 };
  struct PendingMove {
    sharding::ShardId shard;
    SimPod from;
    SimPod to;
  };

  void request(Trigger trigger);
  void scheduleRound();
  void startRound();
  void finishRound(const std::vector<PendingMove>& moves);
  void tick();
  void unregister(SimPod pod);
  void reindex();
  // The round's decision, as moves between simulated pods.
  StatusOr<std::vector<PendingMove>> decide(bool immediate);

  KshardParams params_;
  Random& random_;
  std::vector<SimPod> registered_;           // registration order: the planner's PodIndex
  std::vector<sharding::PodIndex> indexOf_;  // by SimPod; kNoPod when not registered
  Trigger pending_ = Trigger::kNone;
  bool roundRunning_ = false;
  bool confirmed_ = false;  // a periodic round decided nothing since the last change
  std::int64_t roundsRun_ = 0;
  Status error_;
  EndOfInstant round_;  // the next round, after the instant's events
};

}  // namespace kshard::tools
