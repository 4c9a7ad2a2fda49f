#include "tools/simulate_deployment.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace kshard::tools {
namespace {

// Pod IPs from 10.0.0.1 upwards: every pod, replacements included, gets an address of its own.
std::string podAddress(SimPod pod) {
  const auto n = static_cast<std::uint32_t>(pod) + 1;
  return "10." + std::to_string((n >> 16) & 0xFF) + "." + std::to_string((n >> 8) & 0xFF) + "." +
         std::to_string(n & 0xFF) + ":7101";
}

}  // namespace

std::int32_t IntOrPercent::scaled(std::int32_t replicas, bool roundUp) const {
  if (!percent) return value;
  const double exact = static_cast<double>(value) * replicas / 100.0;
  return static_cast<std::int32_t>(roundUp ? std::ceil(exact) : std::floor(exact));
}

SimulatedDeployment::SimulatedDeployment(Scheduler& scheduler, DeploymentTiming timing,
                                         RollingUpdateParams rolling, PodListener& listener)
    : scheduler_(scheduler),
      timing_(timing),
      rolling_(rolling),
      listener_(listener),
      reconcile_(scheduler, [this] { reconcile(); }) {}

std::vector<SimPod> SimulatedDeployment::startReady(std::int32_t replicas,
                                                    const std::string& version) {
  sets_.push_back({version, replicas});
  replicas_ = replicas;
  std::vector<SimPod> created;
  for (std::int32_t i = 0; i < replicas; ++i) {
    const auto p = static_cast<SimPod>(pods_.size());
    pods_.push_back({version, 0, podAddress(p), PodPhase::kReady, false});
    created.push_back(p);
  }
  return created;
}

SimPod SimulatedDeployment::createPod(std::int32_t revision) {
  const auto p = static_cast<SimPod>(pods_.size());
  ReplicaSet& set = sets_[static_cast<std::size_t>(revision)];
  pods_.push_back({set.version, revision, podAddress(p), PodPhase::kStarting, false});
  ++set.starting;
  ++inFlight_;
  scheduler_.runAfter(timing_.startDelay, [this, p] { becomeReady(p); });
  return p;
}

void SimulatedDeployment::becomeReady(SimPod p) {
  SimPodInfo& info = pods_[static_cast<std::size_t>(p)];
  if (info.phase != PodPhase::kStarting) return;  // deleted before it was ready
  --inFlight_;
  --sets_[static_cast<std::size_t>(info.revision)].starting;
  info.phase = PodPhase::kReady;
  listener_.podReady(p);
  // A newly available pod lets a rolling update go on.
  reconcileSoon();
}

void SimulatedDeployment::deletePod(SimPod p) {
  SimPodInfo& info = pods_[static_cast<std::size_t>(p)];
  if (info.phase == PodPhase::kStarting) {
    // Never registered: nothing to drain. (Its pending ready event sees the phase and stops.)
    info.phase = PodPhase::kGone;
    --sets_[static_cast<std::size_t>(info.revision)].starting;
    --inFlight_;
    return;
  }
  info.phase = PodPhase::kTerminating;
  info.deletedAt = scheduler_.clock().now();
  ++inFlight_;
  listener_.podTerminating(p);
  scheduler_.runAfter(timing_.drain, [this, p] { askToUnregister(p); });
}

void SimulatedDeployment::askToUnregister(SimPod p) {
  SimPodInfo& info = pods_[static_cast<std::size_t>(p)];
  // A pod that crashed while draining is accounted for when its death is noticed.
  if (info.phase != PodPhase::kTerminating || info.crashed) return;
  if (const std::optional<SimTime> retryAfter = listener_.holdUnregister(p)) {
    // Held: still terminating, still serving its shards; the sidecar asks again.
    scheduler_.runAfter(*retryAfter, [this, p] { askToUnregister(p); });
    return;
  }
  --inFlight_;
  info.phase = PodPhase::kGone;
  listener_.podStopped(p);
}

std::vector<SimPod> SimulatedDeployment::crash(std::int32_t count, Random& random) {
  std::vector<SimPod> ready;
  for (std::size_t i = 0; i < pods_.size(); ++i) {
    if (pods_[i].phase == PodPhase::kReady && !pods_[i].crashed) {
      ready.push_back(static_cast<SimPod>(i));
    }
  }
  // Partial Fisher-Yates: a uniform sample of `count` ready pods, fixed by the seed.
  std::vector<SimPod> crashed;
  for (std::size_t i = 0; i < static_cast<std::size_t>(count) && i < ready.size(); ++i) {
    const std::size_t j = i + static_cast<std::size_t>(random.uniform(ready.size() - i));
    std::swap(ready[i], ready[j]);
    crashed.push_back(ready[i]);
  }
  for (SimPod p : crashed) {
    pods_[static_cast<std::size_t>(p)].crashed = true;
    ++inFlight_;
    listener_.podCrashed(p);
    scheduler_.runAfter(timing_.detect, [this, p] { noticeDeath(p); });
  }
  return crashed;
}

void SimulatedDeployment::noticeDeath(SimPod p) {
  SimPodInfo& info = pods_[static_cast<std::size_t>(p)];
  --inFlight_;
  if (info.phase == PodPhase::kTerminating) --inFlight_;  // its drain will not finish
  info.phase = PodPhase::kGone;
  listener_.podDied(p);
  // The ReplicaSet sees one pod fewer and replaces it.
  reconcileSoon();
}

void SimulatedDeployment::scaleTo(std::int32_t replicas) {
  replicas_ = replicas;
  sets_.back().desired = replicas;
  reconcileSoon();
}

void SimulatedDeployment::rollingUpdate(const std::string& version) {
  sets_.push_back({version, 0});
  reconcileSoon();
}

void SimulatedDeployment::reconcileSoon() {
  // After everything else due at this instant: the controllers see the instant's events at once.
  reconcile_.request();
}

std::vector<SimPod> SimulatedDeployment::activePods(std::int32_t revision) const {
  std::vector<SimPod> out;
  for (std::size_t i = 0; i < pods_.size(); ++i) {
    const SimPodInfo& p = pods_[i];
    if (p.revision == revision && (p.phase == PodPhase::kStarting || p.phase == PodPhase::kReady)) {
      out.push_back(static_cast<SimPod>(i));
    }
  }
  return out;
}

std::int32_t SimulatedDeployment::availablePods(std::int32_t revision) const {
  std::int32_t n = 0;
  for (const SimPodInfo& p : pods_) {
    if (p.revision == revision && p.phase == PodPhase::kReady && !p.crashed) ++n;
  }
  return n;
}

void SimulatedDeployment::reconcile() {
  const auto current = static_cast<std::int32_t>(sets_.size()) - 1;
  ReplicaSet& next = sets_.back();
  std::int32_t oldDesired = 0;
  for (std::int32_t r = 0; r < current; ++r)
    oldDesired += sets_[static_cast<std::size_t>(r)].desired;
  if (oldDesired > 0) {
    // The deployment controller's rolling update, repeated until it makes no more change.
    const std::int32_t surge = rolling_.maxSurge.scaled(replicas_, true);
    std::int32_t unavailable = rolling_.maxUnavailable.scaled(replicas_, false);
    if (surge == 0 && unavailable == 0) unavailable = 1;  // as Kubernetes' ResolveFenceposts
    const std::int32_t minAvailable = replicas_ - unavailable;
    for (bool changed = true; changed;) {
      changed = false;
      std::int32_t total = oldDesired + next.desired;
      if (next.desired < replicas_ && total < replicas_ + surge) {
        next.desired += std::min(replicas_ + surge - total, replicas_ - next.desired);
        total = oldDesired + next.desired;
        changed = true;
      }
      std::int32_t available = 0;
      for (std::int32_t r = 0; r <= current; ++r) available += availablePods(r);
      const std::int32_t newUnavailable = next.desired - availablePods(current);
      std::int32_t scaleDown =
          std::min({total - minAvailable - newUnavailable, available - minAvailable, oldDesired});
      // Old ReplicaSets shrink oldest first.
      for (std::int32_t r = 0; r < current && scaleDown > 0; ++r) {
        ReplicaSet& old = sets_[static_cast<std::size_t>(r)];
        const std::int32_t n = std::min(scaleDown, old.desired);
        old.desired -= n;
        oldDesired -= n;
        scaleDown -= n;
        if (n > 0) changed = true;
      }
      // Pods deleted in this pass no longer count as available for the next one.
      for (std::int32_t r = 0; r < current; ++r) syncReplicaSet(r);
    }
  } else {
    next.desired = replicas_;
  }
  for (std::int32_t r = 0; r <= current; ++r) syncReplicaSet(r);
}

void SimulatedDeployment::syncReplicaSet(std::int32_t revision) {
  const ReplicaSet& set = sets_[static_cast<std::size_t>(revision)];
  std::vector<SimPod> active = activePods(revision);
  auto missing = set.desired - static_cast<std::int32_t>(active.size());
  for (; missing > 0; --missing) createPod(revision);
  if (missing == 0) return;
  // The ReplicaSet controller deletes pods that are not ready first, then the newest.
  std::sort(active.begin(), active.end(), [this](SimPod a, SimPod b) {
    const bool readyA = pod(a).phase == PodPhase::kReady;
    const bool readyB = pod(b).phase == PodPhase::kReady;
    return readyA != readyB ? !readyA : a > b;
  });
  for (std::int32_t i = 0; i < -missing; ++i) deletePod(active[static_cast<std::size_t>(i)]);
}

std::vector<std::string> SimulatedDeployment::startingVersions() const {
  std::vector<std::string> versions;
  for (const ReplicaSet& set : sets_) {
    if (set.starting > 0 &&
        std::find(versions.begin(), versions.end(), set.version) == versions.end()) {
      versions.push_back(set.version);
    }
  }
  return versions;
}

bool SimulatedDeployment::stable() const {
  if (reconcile_.pending() || inFlight_ > 0) return false;
  for (std::size_t r = 0; r + 1 < sets_.size(); ++r) {
    if (sets_[r].desired > 0) return false;
  }
  return true;
}

}  // namespace kshard::tools
