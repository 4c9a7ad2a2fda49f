// ShardMapController: the Shard Manager of one ShardMap. It runs the rebalance workflow, answers
// the manager API calls for its map, and takes over after a leader change (DESIGN.md "Flows").
//
// Everything it does is serialised on a strand (tasks posted to the injected Scheduler, which runs
// them one at a time) and split into operations that run one after another: a takeover, a
// rebalance round, a registration, an unregistration, the removal of dead pods. An operation
// calls pods and the store asynchronously and continues on the strand when they answer, so a
// ManualScheduler drives the whole workflow in tests without threads or sleeps. Only one
// operation writes at a time, so every status write carries the resourceVersion of the previous
// one, and a round never interleaves with another.
//
// This class is the facade: it routes each call to the part whose one job it is (their state is
// ControllerContext, controller_context.h):
//   OperationQueue     operation_queue.h     one operation at a time; round requests and timers
//   Takeover           takeover.h            a new leader's first write
//   RoundRunner        round_runner.h        one rebalance round, an explicit state machine
//   Registration       registration.h        register, batched
//   Unregistration     unregistration.h      unregister, with the unregister hold
//   PodHealthMonitor   pod_health_monitor.h  dead and unhealthy pods, ownership leases
// Each part's decisions are pure functions declared next to it, tested without I/O.
//
// A rebalance round (one at a time):
//   1. decide: the planner on the stored owners (pure, seeded Random);
//   2. ping the pods involved (every pod in periodic rounds, to reconcile), in parallel, within
//      pingTimeout; drop moves touching a pod that failed;
//   3. unassign in parallel at epoch + 1; drop moves whose unassign failed;
//   4. persist the new owners at epoch + 1 before telling anyone (write-ahead);
//   5. assign in parallel at the persisted epoch;
//   6. check the pods that failed with the API: dead ones are removed and a round follows at
//      once; otherwise the round is retried after rebalanceRetryInterval;
//   7. conditions, an Event, metrics.
// Rounds start on register (immediately when shards are unassigned), on unregister and death
// (immediately), every rebalanceInterval, and after rebalanceRetryInterval when a step failed.
//
// Epoch rules, enforced where marked "Epoch rule N" in the implementation:
//   1. status.epoch increases by one on every persisted change of assignments; each assignment
//      group carries the epoch at which its pod got those shards.
//   2. An unassign carries the epoch the following persist will write (current + 1): the sidecar
//      fences those shards and refuses any later assign with a smaller epoch.
//   3. So every assign carries an epoch persisted after any unassign this leader (or a previous
//      one) may have sent: a round that sent an unassign always persists; a new leader bumps the
//      epoch when it takes over and re-sends assign at that epoch; re-sends use the current
//      persisted epoch.
//   4. Reconciliation by ping: shards the map gives a pod that it does not hold are assigned
//      again; shards a pod holds that the map does not give it are unassigned from it.
//   5. unregister unassigns the pod's shards from the pod itself first, then persists the pod
//      removed and its shards unassigned, answers, and runs the immediate round. (Before that,
//      a terminating pod's unregister may be answered "retry later" while pods of a newer
//      version start: operator/unregister_hold.h. Nothing changes hands then.)
//   6. A Conflict on persist aborts the operation (reload, retry); it never leads to an assign.
//   7. Only the leader acts: every step first checks Leadership::isLeader(), so a replica that
//      lost its lease stops at the next step and never assigns afterwards.
//
// Ownership leases (operator/ownership_leases.h): a pod is dead when its object is gone, its uid
// changed or it finished; its shards are taken without its acknowledgement only when the kubelet
// confirmed that nothing of it runs (terminationConfirmed), or once its ownership lease has
// surely run out, or when its sidecar still answers and releases them (an unassign at once).
// Every command names its target (pod, uid, sidecar incarnation).
//
// Public methods are thread-safe and return at once; replies run on the strand.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "operator/controller_context.h"
#include "operator/operation_queue.h"
#include "operator/pod_health_monitor.h"
#include "operator/registration.h"
#include "operator/round_runner.h"
#include "operator/takeover.h"
#include "operator/unregistration.h"

namespace kshard::manager {

class ShardMapController : public std::enable_shared_from_this<ShardMapController> {
 public:
  // `observed` is the ShardMap as the informer (or a list) saw it.
  static std::shared_ptr<ShardMapController> create(ControllerDeps deps,
                                                    sharding::ShardMap observed);
  ~ShardMapController() = default;
  ShardMapController(const ShardMapController&) = delete;
  ShardMapController& operator=(const ShardMapController&) = delete;

  const protocol::ShardMapRef& ref() const { return c_.ref; }

  // The informer saw a new version of the object (a spec change is picked up by a reload).
  void observe(sharding::ShardMap observed);
  // This replica became leader: take over (reload, drop dead pods, bump the epoch, write
  // status.manager, re-send every assign), then run rounds.
  void startLeading();
  // Leadership is lost: stop at once. Queued calls are answered NotLeader.
  void stopLeading();
  // The pod informer saw a change of a pod labelled for this map (or its deletion).
  void podChanged(const std::string& podName);
  // The ShardMap was deleted or the operator stops: cancel timers, answer queued calls.
  void shutdown();

  // Manager API (leader only; the ShardManager answers followers itself).
  void registerPod(protocol::RegisterRequest request, Reply reply);
  void unregisterPod(protocol::UnregisterRequest request, Reply reply);
  void notifyUnhealthy(protocol::NotifyUnhealthyRequest request, Reply reply);
  // A pod's sidecar confirms its ownership lease. Answered by the leader, and for a grace after
  // it lost the Lease (mayConfirmOwnership), outside the operation queue.
  void renew(protocol::Target target, Reply reply);
  // The map as this replica holds it (the whole resource as JSON).
  void assignments(Reply reply);
  // The changes from version `since` to the current one, for a sidecar whose watch announced
  // `want` (ControllerContext::answerChanges, operator/map_history.h).
  void changes(std::string since, std::string want, Reply reply);
  // The manager API refused a caller (no valid token, or another pod's): a Warning Event on the
  // ShardMap with `reason`.
  void reportRefusedCaller(std::string reason, std::string message);

  // Whether the map as this replica holds it lists that pod (name and uid). Thread-safe.
  bool lists(const std::string& pod, const std::string& uid) const;
  // status.manager as this replica last read it, for followers' NotLeader answers. Thread-safe.
  std::optional<sharding::ManagerRef> storedManager() const;

 private:
  ShardMapController(ControllerDeps deps, sharding::ShardMap observed);

  // Runs `body` on the strand if this replica leads; answers NotLeader otherwise.
  void leaderCall(Reply reply, std::function<void(Reply)> body);
  // Answers NotLeader when this replica holds only the head of a segmented map.
  bool headOnly(const Reply& reply) const;

  ControllerContext c_;
  OperationQueue queue_{c_};
  PodHealthMonitor health_{c_, queue_};
  RoundRunner rounds_{c_, queue_, health_};
  Takeover takeover_{c_, queue_, health_};
  Registration registration_{c_, queue_, health_};
  Unregistration unregistration_{c_, queue_, health_};
};

}  // namespace kshard::manager
