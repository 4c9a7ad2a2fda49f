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

#include <cstdint>
#include <deque>
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
#include "operator/leadership.h"
#include "operator/operator_metrics.h"
#include "operator/pod_client.h"
#include "operator/pod_directory.h"
#include "operator/round_plan.h"
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

class ShardMapController : public std::enable_shared_from_this<ShardMapController> {
 public:
  // `observed` is the ShardMap as the informer (or a list) saw it.
  static std::shared_ptr<ShardMapController> create(ControllerDeps deps,
                                                    sharding::ShardMap observed);
  ~ShardMapController();
  ShardMapController(const ShardMapController&) = delete;
  ShardMapController& operator=(const ShardMapController&) = delete;

  const protocol::ShardMapRef& ref() const { return ref_; }

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
  // The manager API refused a caller (no valid token, or another pod's): a Warning Event on the
  // ShardMap with `reason`.
  void reportRefusedCaller(std::string reason, std::string message);

  // status.manager as this replica last read it, for followers' NotLeader answers. Thread-safe.
  std::optional<sharding::ManagerRef> storedManager() const;

 private:
  struct Op {
    std::string name;                                // for logs
    std::function<void(std::function<void()>)> run;  // calls its argument once when finished
    Reply
        reply;  // the caller waiting for this operation, answered if it is cancelled; may be empty
  };
  struct RoundRequest {
    bool immediate = false;
    bool resendAll = false;
  };
  struct Round;

  ShardMapController(ControllerDeps deps, sharding::ShardMap observed);

  // Strand plumbing.
  void post(std::function<void()> task);
  template <typename T>
  std::function<void(T)> onStrand(std::function<void(T)> fn);
  // Leading and done taking over: may act on pods and on the store.
  bool acting() const;
  // Runs `body` on the strand if this replica leads; answers NotLeader otherwise.
  void leaderCall(Reply reply, std::function<void(Reply)> body);
  // Holds the lease (the takeover itself runs in this state).
  bool leadingNow() const;

  // Operations.
  struct Refusal {
    int status;
    std::string_view code;
    std::string message;
  };
  // Why `pod` (what the API shows for the caller's name) may not register as `request`; nullopt
  // when it may.
  std::optional<Refusal> registerRefusal(const std::optional<PodInfo>& pod,
                                         const protocol::RegisterRequest& request) const;
  void enqueue(Op op, bool front = false);
  void pump();
  void requestRound(RoundRequest request);
  void ensureFresh(std::function<void(Status)> then);
  void adopt(sharding::ShardMap map);
  void persist(sharding::ShardMap next, std::function<void(Status)> then);
  void takeover(std::function<void()> done);
  void scheduleTakeoverRetry();
  void runRound(RoundRequest request, std::function<void()> done);
  void roundPing(std::shared_ptr<Round> round);
  void roundUnassign(std::shared_ptr<Round> round);
  void roundPersist(std::shared_ptr<Round> round);
  void roundAssign(std::shared_ptr<Round> round);
  void roundCheckFailed(std::shared_ptr<Round> round);
  void roundFinish(std::shared_ptr<Round> round, std::string_view result);
  // Registrations admitted but not yet recorded, written together by one "register" op.
  struct RegisterBatch {
    std::vector<std::pair<protocol::RegisterRequest, Reply>> items;  // distinct pods
  };
  static constexpr std::size_t kMaxRegisterBatch = 256;
  void admitRegister(protocol::RegisterRequest request, Reply reply);
  void doRegister(std::shared_ptr<RegisterBatch> batch, int attempt, std::function<void()> done);
  // resendAssign for each pod in turn, then `then`.
  void resendEach(std::vector<std::string> pods, std::function<void()> then);
  void doUnregister(protocol::UnregisterRequest request, Reply reply, int attempt,
                    std::function<void()> done);
  // The 409 UnregisterDeferred for this unregister, or nullopt to go ahead
  // (operator/unregister_hold.h). `observed` is the API's view of the pod.
  std::optional<http::Response> deferral(const protocol::UnregisterRequest& request,
                                         const std::optional<PodInfo>& observed);
  // startingVersions() of the informer's pods, recomputed only when a pod or the status changed.
  const std::vector<std::string>& starting();
  void queueRemoval(const std::string& podName, std::string reason);
  void removeDead(std::set<std::string> candidates, std::function<void()> done);
  // What removeDead may do with a dead pod now (shard_map_controller_leases.cc).
  enum class Removal { kNow, kLater };
  Removal removal(const sharding::RegisteredPod& pod, const std::optional<PodInfo>& observed);
  // A register or renew confirmed the pod's ownership lease now.
  void recordGrant(const std::string& pod, const std::string& uid);
  // The dead pod's sidecar may still run: asks it to release its shards (an unassign), so that
  // they need not wait for its lease. A success queues the pod's removal again.
  void releaseDeadPod(const sharding::RegisteredPod& pod);
  void scheduleRemovalCheck(const std::string& podName, SteadyTime at);
  // Forgets the lease facts of pods no longer registered.
  void forgetLeases();
  // The pod was found dead (vanished) and waits for its removal: it gets no ping, assign or
  // new shard from now on, so that a release it acknowledged stays true until the removal.
  bool awaitingRemoval(const sharding::RegisteredPod& pod) const;
  void checkPods(std::set<std::string> names,
                 std::function<void(std::map<std::string, PodHealth>)> then);
  // As checkPods, with what the API showed (nullopt: gone, or the API could not be asked).
  struct Inspection {
    PodHealth health = PodHealth::kAlive;
    std::optional<PodInfo> observed;
  };
  void inspectPods(std::set<std::string> names,
                   std::function<void(std::map<std::string, Inspection>)> then);
  void resendAssign(const std::string& podName, std::function<void()> done);

  // Status helpers.
  std::optional<sharding::PodIndex> indexOf(const std::string& podName) const;
  // Whom commands to a registered pod are meant for.
  static protocol::Target targetOf(const sharding::RegisteredPod& pod) {
    return {pod.name, pod.uid, pod.incarnation};
  }
  std::vector<PodRuntime> runtimeVector() const;
  bool movesPending(const sharding::ShardMap& map, const sharding::ShardTable& table) const;
  void setConditions(sharding::ShardMap& map, const sharding::ShardTable& table,
                     bool retryPending) const;
  void schedulePeriodic();
  void scheduleRetry(Duration delay);
  void event(EventType type, std::string reason, std::string message);

  ControllerDeps d_;
  const protocol::ShardMapRef ref_;
  const std::string key_;  // "{namespace}/{name}"
  Logger log_;

  mutable std::mutex mu_;  // held by every strand task; guards everything below
  sharding::ShardMap current_;
  bool stale_ = true;  // reload from the store before the next operation
  bool leading_ = false;
  bool tookOver_ = false;  // the takeover write succeeded in this term
  bool stopped_ = false;
  // The highest epoch an unassign from this replica carried. While it is above status.epoch, the
  // next write bumps the epoch to it before any assign (epoch rule 3).
  std::int64_t fenceFloor_ = 0;
  std::map<std::string, PodRuntime> runtime_;  // by pod name
  std::deque<Op> ops_;
  // The batch the next queued "register" op will write; null when none is queued.
  std::shared_ptr<RegisterBatch> openBatch_;
  bool opRunning_ = false;
  std::uint64_t opSeq_ = 0;
  std::optional<RoundRequest> requested_;
  Scheduler::TaskId periodicTimer_ = 0;
  Scheduler::TaskId retryTimer_ = 0;
  bool retryPending_ = false;
  int consecutiveConflicts_ = 0;
  std::uint64_t roundSeq_ = 0;
  std::set<std::string> removalsQueued_;  // pods the next remove-dead operation checks
  bool removalOpQueued_ = false;
  std::set<std::string> checksInFlight_;
  std::optional<sharding::ManagerRef> storedManager_;
  // The memo behind starting(): valid for podsGeneration_ and the status' resourceVersion.
  std::uint64_t podsGeneration_ = 0;  // bumped by every podChanged
  struct StartingMemo {
    std::uint64_t podsGeneration = 0;
    std::string resourceVersion;
    std::vector<std::string> versions;
  };
  std::optional<StartingMemo> startingMemo_;
  // Pods whose unregister is being held, with when the first deferral was answered.
  std::map<std::string, SteadyTime> held_;

  // Ownership leases (kept across leadership terms). By "{pod}/{uid}": the last renew this
  // replica granted, when it first found the pod dead, and dead pods whose sidecar released its
  // shards (or is being asked to).
  SteadyTime termStart_{};
  std::map<std::string, SteadyTime> grants_;
  std::map<std::string, SteadyTime> deathSeen_;
  // Pods whose sidecar spoke (registered or renewed) while the informer showed every container
  // terminated: that status predates a restart the kubelet could not report, and confirms no end.
  std::set<std::string> staleTermination_;
  std::set<std::string> released_;
  std::set<std::string> releasing_;
  std::map<std::string, Scheduler::TaskId> removalChecks_;  // by pod name
};

}  // namespace kshard::manager
