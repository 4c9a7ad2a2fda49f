// SimulatedDeployment: the pods of one app as a Kubernetes Deployment runs them, on simulated
// time, for `kshardctl simulate`.
//
// What it models (kube-controller-manager's deployment and replicaset controllers, defaults):
//   - A pod is created, becomes ready `startDelay` later and then registers with the shard
//     manager (the sidecar registers once the app answers).
//   - Deleting a pod sets its deletionTimestamp: it is terminating (it drains: takes no new
//     shards) and asks to unregister `drain` later, when its entities are stopped; then it is
//     gone. The shard manager may hold the unregister (kshard's operator during a rolling
//     update): the pod stays terminating, keeps serving its shards and asks again when the
//     manager says. A pod deleted before it was ready never registered and is gone at once.
//   - A crashed pod stops at once (it serves nothing from then on); its death is noticed `detect`
//     later (the pod object is gone or Failed), and only then does the shard manager learn of it
//     and does the ReplicaSet replace it.
//   - Scaling changes the replicas of the current ReplicaSet: new pods are created at once,
//     surplus pods are deleted at once, not-ready pods first, then the newest.
//   - A rolling update creates a ReplicaSet of the new version and moves replicas over as the
//     deployment controller does: maxSurge (rounded up) and maxUnavailable (rounded down) of the
//     replicas; the new ReplicaSet grows while all ReplicaSets together have fewer than
//     replicas + maxSurge; old ReplicaSets shrink by at most
//     min(allReplicas - minAvailable - newUnavailable, available - minAvailable), where
//     minAvailable = replicas - maxUnavailable; terminating pods count for nothing. Everything a
//     controller would do in successive syncs at one instant happens at that instant; controller
//     latency is zero. minReadySeconds is 0 (ready = available).
// The deployment reports pod lifecycle events to a PodListener; it never touches shards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "tools/simulate_instant.h"
#include "tools/simulate_ledger.h"

namespace kshard::tools {

enum class PodPhase {
  kStarting,     // created, not ready yet
  kReady,        // ready and registered
  kTerminating,  // deletionTimestamp set, draining
  kGone,         // unregistered (drained), or its crash was noticed
};

struct SimPodInfo {
  std::string version;        // the app version label, e.g. "1.0.0"
  std::int32_t revision = 0;  // the ReplicaSet it belongs to: 0, 1, ... (later is newer)
  std::string address;        // "ip:port", unique per pod (a replacement gets a new one)
  PodPhase phase = PodPhase::kStarting;
  bool crashed = false;    // stopped abruptly; phase says whether the death was noticed yet
  SteadyTime deletedAt{};  // the deletionTimestamp, once terminating
};

// What a shard manager hears of the pods. Calls come from scheduler tasks.
class PodListener {
 public:
  virtual ~PodListener() = default;
  virtual void podReady(SimPod pod) = 0;        // ready: registers
  virtual void podTerminating(SimPod pod) = 0;  // a registered pod got its deletionTimestamp
  virtual void podStopped(SimPod pod) = 0;      // a registered pod drained and unregistered
  virtual void podCrashed(SimPod pod) = 0;      // a registered pod stopped abruptly (not noticed)
  virtual void podDied(SimPod pod) = 0;         // a registered pod's crash was noticed
  // A terminating pod has drained and asks to unregister. nullopt: it may (podStopped follows at
  // once); otherwise it stays terminating, keeps its shards, and asks again after the positive
  // duration returned (the manager's Retry-After). The default never holds.
  virtual std::optional<SimTime> holdUnregister(SimPod /*pod*/) { return std::nullopt; }
};

struct DeploymentTiming {
  SimTime startDelay = std::chrono::seconds(10);
  SimTime drain = std::chrono::seconds(5);
  SimTime detect = std::chrono::seconds(0);
};

// maxSurge / maxUnavailable: an absolute count, or a percentage of the replicas.
struct IntOrPercent {
  std::int32_t value = 25;
  bool percent = true;
  // Kubernetes' GetScaledValueFromIntOrPercent.
  std::int32_t scaled(std::int32_t replicas, bool roundUp) const;
};

struct RollingUpdateParams {
  IntOrPercent maxSurge{25, true};
  IntOrPercent maxUnavailable{25, true};
};

class SimulatedDeployment {
 public:
  SimulatedDeployment(Scheduler& scheduler, DeploymentTiming timing, RollingUpdateParams rolling,
                      PodListener& listener);

  // `replicas` pods of `version`, ready at once, without telling the listener: the state before a
  // scenario. Returns them in creation order.
  std::vector<SimPod> startReady(std::int32_t replicas, const std::string& version);

  void scaleTo(std::int32_t replicas);
  // Precondition: `version` is newer than the running one.
  void rollingUpdate(const std::string& version);
  // Crashes `count` ready pods chosen uniformly at random. Precondition: count <= ready pods.
  std::vector<SimPod> crash(std::int32_t count, Random& random);

  const std::vector<SimPodInfo>& pods() const { return pods_; }
  // The versions that have pods starting (created, neither ready nor deleted yet), each once.
  std::vector<std::string> startingVersions() const;
  const SimPodInfo& pod(SimPod p) const { return pods_[static_cast<std::size_t>(p)]; }
  std::int32_t replicas() const { return replicas_; }
  // No pod starting, draining or dead unnoticed, no rollout in progress, nothing left to do.
  bool stable() const;

 private:
  struct ReplicaSet {
    std::string version;
    std::int32_t desired = 0;
    std::int32_t starting = 0;  // its pods in PodPhase::kStarting
  };

  SimPod createPod(std::int32_t revision);
  void deletePod(SimPod pod);
  void becomeReady(SimPod pod);
  // The end of the drain, and each retry while the shard manager holds the unregister.
  void askToUnregister(SimPod pod);
  void noticeDeath(SimPod pod);
  void reconcileSoon();
  void reconcile();
  // The ReplicaSet controller: creates missing pods, deletes surplus ones.
  void syncReplicaSet(std::int32_t revision);
  // Pods of the ReplicaSet that it counts: not terminating, not gone (a crash not yet noticed
  // still counts: the controller does not know).
  std::vector<SimPod> activePods(std::int32_t revision) const;
  std::int32_t availablePods(std::int32_t revision) const;

  Scheduler& scheduler_;
  DeploymentTiming timing_;
  RollingUpdateParams rolling_;
  PodListener& listener_;
  std::vector<SimPodInfo> pods_;
  std::vector<ReplicaSet> sets_;  // by revision; the last one is the current
  std::int32_t replicas_ = 0;
  EndOfInstant reconcile_;
  std::int32_t inFlight_ = 0;  // pods starting, draining, or crashed and not noticed
};

}  // namespace kshard::tools
