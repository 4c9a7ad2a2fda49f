// PodHealthMonitor: the registered pods' health (operator/pod_directory.h) and ownership leases
// (operator/ownership_leases.h) for one ShardMapController: asks the API about suspects, removes
// the dead pods from the map, answers notifyUnhealthy and renew.
//
// A pod is dead when its object is gone, its uid changed or it finished; its shards are taken
// without its acknowledgement only when the kubelet confirmed that nothing of it runs
// (terminationConfirmed), or once its ownership lease has surely run out, or when its sidecar
// still answers and releases them (an unassign at once). The decisions are the pure functions
// below; pod_health_monitor.cc does the checks and the removal, pod_health_leases.cc the leases.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/controller_context.h"
#include "operator/operation_queue.h"

namespace kshard::manager {

// What the API showed for a registered pod (nullopt observed: gone, another uid, or the API
// could not be asked; an API error proves nothing, so the pod then counts as alive).
struct Inspection {
  PodHealth health = PodHealth::kAlive;
  std::optional<PodInfo> observed;
};
// Pure.
Inspection inspection(const StatusOr<std::optional<PodInfo>>& fetched,
                      const std::string& registeredUid);

struct DroppedPods {
  std::vector<sharding::RegisteredPod> pods;  // in the order removed (last index first)
  bool hadShards = false;                     // some of them owned shards
};
// Removes from `map` and `table` the pods `seen` shows dead, except those with shards for which
// `keep` says they may still run. Pure but for what `keep` does.
DroppedPods dropDeadPods(
    sharding::ShardMap& map, sharding::ShardTable& table,
    const std::map<std::string, Inspection>& seen,
    const std::function<bool(const sharding::RegisteredPod&, const std::optional<PodInfo>&)>& keep);

// The epoch of a write that removes pods (epoch rule 1: the owners change when they had shards;
// epoch rule 3: an unassign sent at an epoch not yet persisted is covered). Pure.
std::int64_t epochAfterRemoval(std::int64_t epoch, std::int64_t fenceFloor, bool hadShards);

// When the shards of a dead pod may be taken. Pure; records in `facts` when the pod was first
// found dead.
struct RemovalDecision {
  enum class Kind {
    kNow,           // nothing of it runs
    kRecheck,       // finished but not confirmed, object still there: look again at `at`
    kWaitForLease,  // vanished unconfirmed: its lease runs out at `at`
  };
  Kind kind = Kind::kNow;
  SteadyTime at{};
  bool firstSeen = false;  // kWaitForLease: found dead just now
};
struct RemovalFacts {
  std::string key;                   // leaseKey(pod, uid)
  std::optional<PodInfo> lastState;  // the API's view, or the informer's final state
  bool observed = false;             // lastState is the API's view of the object now
  Duration lease{};
  SteadyTime termStart{};
  SteadyTime now{};
};
RemovalDecision decideRemoval(LeaseFacts& facts, const RemovalFacts& pod);

class PodHealthMonitor {
 public:
  PodHealthMonitor(ControllerContext& c, OperationQueue& queue) : c_(c), queue_(queue) {}

  // The pod informer saw a change of a registered pod.
  void podChanged(const std::string& podName);
  // Answered at once (202); the check follows.
  void notifyUnhealthy(const protocol::NotifyUnhealthyRequest& request, const Reply& accepted);
  // A pod's sidecar confirms its ownership lease (pod_health_leases.cc).
  void renew(const protocol::Target& target, const Reply& reply);

  // Queues `podName` for the next remove-dead operation (at the front of the queue).
  void queueRemoval(const std::string& podName, std::string reason);
  // What the API shows now for each of `names` (registered pods).
  void inspectPods(std::set<std::string> names,
                   std::function<void(std::map<std::string, Inspection>)> then);
  void checkPods(std::set<std::string> names,
                 std::function<void(std::map<std::string, PodHealth>)> then);

  // What may be done with a dead pod's shards now: kNow, or kLater (then a check is scheduled,
  // and its sidecar asked to release them when this replica acts).
  enum class Removal { kNow, kLater };
  Removal removal(const sharding::RegisteredPod& pod, const std::optional<PodInfo>& observed);
  // A register or renew confirmed the pod's ownership lease now.
  void recordGrant(const std::string& pod, const std::string& uid);
  // The pod was found dead (vanished) and waits for its removal: it gets no ping, assign or
  // new shard from now on, so that a release it acknowledged stays true until the removal.
  bool awaitingRemoval(const sharding::RegisteredPod& pod) const;
  // A release obtained in this term may be undone by another leader's assigns.
  void forgetReleases() { c_.leases.released.clear(); }
  // The queue dropped its operations: a queued remove-dead is gone too.
  void dropQueuedRemovals() { removalsQueued_.clear(); removalOpQueued_ = false; }

 private:
  void removeDead(std::set<std::string> candidates, std::function<void()> done);
  void removeInspected(std::map<std::string, Inspection> seen, std::function<void()> done);
  void pingUnhealthy(const std::string& name, const std::string& address);
  // The dead pod's sidecar may still run: asks it to release its shards (an unassign), so that
  // they need not wait for its lease. A success queues the pod's removal again.
  void releaseDeadPod(const sharding::RegisteredPod& pod);
  void scheduleRemovalCheck(const std::string& podName, SteadyTime at);

  ControllerContext& c_;
  OperationQueue& queue_;
  std::set<std::string> removalsQueued_;  // pods the next remove-dead operation checks
  bool removalOpQueued_ = false;
  std::set<std::string> checksInFlight_;
  std::map<std::string, Scheduler::TaskId> removalChecks_;  // by pod name
};

}  // namespace kshard::manager
