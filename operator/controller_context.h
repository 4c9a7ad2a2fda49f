// ControllerContext: what the parts of one ShardMapController share (shard_map_controller.h): the
// dependencies, the strand every part runs on, and the map as this replica holds it, with the
// few effects every part needs (load, persist, Events). The parts are
//   operation_queue.h     one operation at a time, the round requests and their timers;
//   takeover.h            what a new leader does first;
//   round_runner.h        one rebalance round, step by step;
//   registration.h        register calls, batched into one write;
//   unregistration.h      unregister calls, with the unregister hold;
//   pod_health_monitor.h  dead and unhealthy pods, and their ownership leases.
// Their decisions are pure functions next to them (round_plan.h, unregister_hold.h, ...).
//
// Everything here is touched only on the strand (a task holding `mu`), except storedManager.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "http/message.h"
#include "operator/event_sink.h"
#include "operator/handoff_throttle.h"
#include "operator/leadership.h"
#include "operator/map_history.h"
#include "operator/operator_metrics.h"
#include "operator/pod_client.h"
#include "operator/pod_directory.h"
#include "operator/round_plan.h"
#include "operator/shard_loads.h"
#include "operator/shard_map_store.h"
#include "protocol/wire.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

struct ControllerDeps {
  Scheduler& scheduler;  // must run tasks one at a time (ThreadScheduler, ManualScheduler)
  Random& random;        // the planner's samples
  ShardMapStore& store;
  PodClient& pods;
  PodDirectory& directory;
  Leadership& leadership;
  EventSink& events;
  OperatorMetrics& metrics;
  Logger logger;
  sharding::ManagerRef self;  // this replica's pod name and manager API address
  // The longest a terminating pod's unregister is held while newer pods start
  // (operator/unregister_hold.h); zero turns the hold off.
  Duration maxUnregisterHold = std::chrono::seconds(60);
};

using Reply = std::function<void(http::Response)>;

// The body of a follower's (or deposed leader's) 503: {"error": {...}, "leader": "ip:port"}.
http::Response notLeaderResponse(const std::string& leaderAddress);
// 200 {"epoch": ...}, the answer of register and unregister.
http::Response epochResponse(std::int64_t epoch, std::optional<bool> terminating = std::nullopt);
// 503 Unavailable: the caller retries.
http::Response unavailableResponse(std::string_view message);

// Tasks run one at a time, each holding the controller's mutex, and only while the controller
// (`owner`) lives: a call that answers after the controller is gone is dropped.
class Strand {
 public:
  Strand(Scheduler& scheduler, std::mutex& mu) : scheduler_(scheduler), mu_(mu) {}
  // Set once, right after the owner's shared_ptr exists; nothing is posted before.
  void bind(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  void post(std::function<void()> task);
  // `fn` as a callback any thread may call: it runs `fn` on the strand.
  template <typename T>
  std::function<void(T)> wrap(std::function<void(T)> fn) {
    return [this, owner = owner_, fn = std::move(fn)](T result) {
      // The owner is held across post(): post() reads this strand, which the owner holds.
      const auto self = owner.lock();
      if (!self) return;
      post([fn, result = std::move(result)]() mutable { fn(std::move(result)); });
    };
  }
  // Runs `task` on the strand no earlier than `delay` from now.
  Scheduler::TaskId after(Duration delay, std::function<void()> task);

 private:
  Scheduler& scheduler_;
  std::mutex& mu_;
  std::weak_ptr<void> owner_;
};

// The lease facts of the registered pods (operator/ownership_leases.h), kept across leadership
// terms. By "{pod}/{uid}" (leaseKey).
struct LeaseFacts {
  std::map<std::string, SteadyTime> grants;     // the last renew this replica granted
  std::map<std::string, SteadyTime> deathSeen;  // when this replica first found the pod dead
  // Pods whose sidecar spoke (registered or renewed) while the informer showed every container
  // terminated: that status predates a restart the kubelet could not report, and confirms no end.
  std::set<std::string> staleTermination;
  std::set<std::string> released;   // dead pods whose sidecar released its shards
  std::set<std::string> releasing;  // ... or is being asked to
  // Forgets the facts of pods not in `pods`. Pure.
  void forgetAllBut(const std::vector<sharding::RegisteredPod>& pods);
};
std::string leaseKey(const std::string& pod, const std::string& uid);

struct ControllerContext {
  ControllerContext(ControllerDeps deps, sharding::ShardMap observed);

  ControllerDeps d;
  const protocol::ShardMapRef ref;
  const std::string key;  // "{namespace}/{name}"
  Logger log;
  mutable std::mutex mu;  // held by every strand task; guards everything below
  Strand strand{d.scheduler, mu};

  sharding::ShardMap current;
  bool stale = true;  // reload from the store before the next operation
  bool leading = false;
  bool tookOver = false;  // the takeover write succeeded in this term
  bool stopped = false;
  SteadyTime termStart{};
  // The highest epoch an unassign from this replica carried. While it is above status.epoch, the
  // next write bumps the epoch to it before any assign (epoch rule 3).
  std::int64_t fenceFloor = 0;
  std::map<std::string, PodRuntime> runtime;  // by pod name
  bool retryPending = false;                  // the last round failed a step
  int consecutiveConflicts = 0;
  std::optional<sharding::ManagerRef> storedManager;
  LeaseFacts leases;
  ShardLoads loads;  // what the pods' ping answers reported (spec.balance: load, status.load)
  // Handoffs that failed in a row, per shard, in this term (handoff_throttle.h).
  HandoffThrottle throttle;
  // The versions of the map this replica stored or read, for sidecars' reads of changes.
  MapHistory history;
  // Reads of changes waiting for the version their watch announced (answerChanges).
  struct WaitingRead {
    std::string since;
    std::string want;
    Reply reply;
    SteadyTime until;
  };
  std::vector<WaitingRead> waitingReads;
  bool readTimerArmed = false;

  // Leading and done taking over: may act on pods and on the store.
  bool acting() const;
  // Holds the lease (the takeover itself runs in this state).
  bool leadingNow() const;

  std::optional<sharding::PodIndex> indexOf(const std::string& podName) const;
  const sharding::RegisteredPod& pod(sharding::PodIndex i) const {
    return current.status.pods[static_cast<std::size_t>(i)];
  }
  // Whom commands to a registered pod are meant for.
  static protocol::Target targetOf(const sharding::RegisteredPod& pod) {
    return {pod.name, pod.uid, pod.incarnation};
  }
  StatusOr<sharding::ShardTable> table() const;
  std::vector<PodRuntime> runtimeVector() const;
  void setConditions(sharding::ShardMap& map, const sharding::ShardTable& table,
                     bool retryPending) const;
  // The planner's moves for a round on `map` owned as `table`: with spec.balance load, a
  // periodic round with every pod's load known asks the load planner; while a pod has not
  // answered yet it only places unassigned shards (counts are not what this map balances); with
  // a pod that answers without load, the count planner's round. Otherwise the count planner's.
  // Periodic rounds withhold the shards in a handoff backoff (`throttle`).
  StatusOr<std::vector<sharding::Move>> decideMoves(const sharding::ShardMap& map,
                                                  const sharding::ShardTable& table,
                                                  const std::vector<PodRuntime>& pods,
                                                  bool immediate, Random& random) const;
  void event(EventType type, std::string reason, std::string message);
  // Answers a sidecar's read of the changes since `since` (operator/map_history.h). A read whose
  // watch announced a version this replica has not seen yet (`want`) waits for it, up to
  // kReadWait: the API server tells watchers of a write before this replica has its answer.
  void answerChanges(std::string since, std::string want, Reply reply);

  // Reloads the map from the store when stale; `then` runs on the strand.
  void ensureFresh(std::function<void(Status)> then);
  // Takes `map` as the current one (a load, a write, or a follower's informer).
  void adopt(sharding::ShardMap map);
  // Writes `next`'s status (with the resourceVersion of the previous write); `then` runs on the
  // strand. Any failure marks the map stale.
  void persist(sharding::ShardMap next, std::function<void(Status)> then);

 private:
  bool movesPending(const sharding::ShardMap& map, const sharding::ShardTable& table) const;
  // Answers the waiting reads whose version has come, or whose wait is over.
  void answerWaitingReads();
  // Checks the waiting reads again a little later, while any waits.
  void armReadTimer();
};

}  // namespace kshard::manager
