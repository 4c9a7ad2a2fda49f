// PodHealthMonitor: the pods' ownership leases (operator/ownership_leases.h) — the renew call,
// and when the shards of a dead pod may be taken without its acknowledgement.
#include <algorithm>

#include "operator/ownership_leases.h"
#include "operator/pod_health_monitor.h"

namespace kshard::manager {

RemovalDecision decideRemoval(LeaseFacts& facts, const RemovalFacts& pod) {
  // The kubelet said that nothing of the pod runs, for good.
  const bool confirmed = pod.lastState && terminationConfirmed(*pod.lastState);
  if (confirmed && !facts.staleTermination.count(pod.key)) return {};
  // Its sidecar answered an unassign of all its shards: they are released.
  if (facts.released.count(pod.key)) return {};
  // A confirmation older than the sidecar's last word is waited out like a vanishing: the pod
  // gets no renewal any more (deathSeen), and its lease runs out.
  if (pod.observed && !confirmed) {
    // Finished, not confirmed, and the object still exists: the API server still takes its
    // token, so its lease may be renewed. Looked at again later.
    return {RemovalDecision::Kind::kRecheck, pod.now + pod.lease, false};
  }
  const auto [seen, first] = facts.deathSeen.try_emplace(pod.key, pod.now);
  const auto grant = facts.grants.find(pod.key);
  const SteadyTime over = leaseSurelyOver(
      {pod.lease,
       grant == facts.grants.end() ? std::nullopt : std::optional<SteadyTime>(grant->second),
       pod.termStart, seen->second});
  if (pod.now >= over) return {};
  return {RemovalDecision::Kind::kWaitForLease, over, first};
}

void PodHealthMonitor::renew(const protocol::Target& target, const Reply& reply) {
  const SteadyTime now = c_.d.scheduler.clock().now();
  if (c_.stopped ||
      !mayConfirmOwnership(c_.d.leadership, now, graceWithoutApi(c_.current.spec.ownershipLease))) {
    reply(notLeaderResponse(""));
    return;
  }
  const auto idx = c_.indexOf(target.pod);
  if (!idx || c_.pod(*idx).uid != target.uid) {
    reply(
        http::Response::error(404, protocol::errors::kPodNotAlive,
                              "pod " + target.pod + " (uid " + target.uid + ") is not registered"));
    return;
  }
  const sharding::RegisteredPod& pod = c_.pod(*idx);
  if (pod.incarnation != target.incarnation) {
    reply(http::Response::error(409, protocol::errors::kWrongTarget,
                                "pod " + pod.name + " is registered by sidecar incarnation " +
                                    pod.incarnation + ", not " + target.incarnation));
    return;
  }
  // A pod found dead (its object gone, replaced or finished, in the informer's view) is never
  // confirmed again: the wait for its lease to run out must not be extended by the pod itself.
  // (While the API server is down, the manager API lets a renew through on the token alone:
  // this is what stops a pod whose object is gone.)
  const std::string key = leaseKey(pod.name, pod.uid);
  const auto cached = c_.d.directory.cached(c_.ref.ns, pod.name);
  if (c_.leases.deathSeen.count(key) || !cached || cached->uid != pod.uid ||
      cached->phase == "Failed" || cached->phase == "Succeeded") {
    reply(http::Response::error(404, protocol::errors::kPodNotAlive,
                                "pod " + pod.name + " (uid " + pod.uid + ") is gone"));
    return;
  }
  // Recorded before the answer: the sidecar counts its lease from when it sent this call, so
  // no later than now.
  recordGrant(pod.name, pod.uid);
  reply(epochResponse(c_.current.status.epoch));
}

void PodHealthMonitor::recordGrant(const std::string& pod, const std::string& uid) {
  const std::string key = leaseKey(pod, uid);
  c_.leases.grants[key] = c_.d.scheduler.clock().now();
  const auto cached = c_.d.directory.cached(c_.ref.ns, pod);
  if (cached && cached->uid == uid && cached->containersTerminated) {
    c_.leases.staleTermination.insert(key);
  } else {
    c_.leases.staleTermination.erase(key);
  }
}

PodHealthMonitor::Removal PodHealthMonitor::removal(const sharding::RegisteredPod& pod,
                                                    const std::optional<PodInfo>& observed) {
  RemovalFacts facts;
  facts.key = leaseKey(pod.name, pod.uid);
  facts.now = c_.d.scheduler.clock().now();
  facts.lease = c_.current.spec.ownershipLease;
  facts.termStart = c_.termStart;
  facts.observed = observed.has_value();
  facts.lastState = observed ? observed : c_.d.directory.finalState(c_.ref.ns, pod.uid);
  const RemovalDecision decision = decideRemoval(c_.leases, facts);
  switch (decision.kind) {
    case RemovalDecision::Kind::kNow:
      return Removal::kNow;
    case RemovalDecision::Kind::kRecheck:
      scheduleRemovalCheck(pod.name, decision.at);
      return Removal::kLater;
    case RemovalDecision::Kind::kWaitForLease:
      break;
  }
  if (decision.firstSeen) {
    const auto waitMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(decision.at - facts.now).count();
    c_.log.warn(
        "pod vanished without Kubernetes confirming its end; its shards move once its "
        "ownership lease has run out, or when its sidecar releases them",
        {{"pod", pod.name}, {"uid", pod.uid}, {"wait_ms", waitMs}});
    c_.event(EventType::kWarning, "PodVanished",
             "pod " + pod.name + " (uid " + pod.uid +
                 ") is gone but its containers were not reported terminated (a force delete or "
                 "a lost node?): its shards move in at most " +
                 std::to_string((waitMs + 999) / 1000) +
                 " s, when its ownership lease has run out");
  }
  if (c_.acting()) releaseDeadPod(pod);
  scheduleRemovalCheck(pod.name, decision.at);
  return Removal::kLater;
}

void PodHealthMonitor::releaseDeadPod(const sharding::RegisteredPod& pod) {
  const std::string key = leaseKey(pod.name, pod.uid);
  const auto idx = c_.indexOf(pod.name);
  auto table = c_.table();
  if (!idx || !table.ok() || !c_.leases.releasing.insert(key).second) return;
  const sharding::ShardSet shards = table->shardsOf(*idx);
  // Epoch rules 2 and 3: at the epoch the removal will persist.
  const std::int64_t fence = std::max(c_.current.status.epoch + 1, c_.fenceFloor);
  c_.fenceFloor = std::max(c_.fenceFloor, fence);
  protocol::ShardsRequest req{c_.key, ControllerContext::targetOf(pod),
                              static_cast<protocol::Epoch>(fence), shards};
  c_.d.pods.unassign(
      pod.address, req, c_.current.spec.handoffTimeout + c_.current.spec.pingTimeout,
      c_.strand.wrap<UnassignAnswer>([this, key, name = pod.name,
                                      term = c_.termStart](UnassignAnswer answer) {
        const Status& s = answer.status;
        c_.leases.releasing.erase(key);
        if (!s.ok()) {
          c_.log.info("a vanished pod's sidecar did not release its shards",
                      {{"pod", name}, {"error", s.toString()}});
          return;
        }
        // A release answered after this term ended may have been undone by
        // another leader's assigns (as stopLeading's forgetReleases says): it
        // counts only in the term that asked for it.
        if (!c_.acting() || c_.termStart != term) return;
        c_.leases.released.insert(key);
        queueRemoval(name, "its sidecar released its shards");
      }));
}

void PodHealthMonitor::scheduleRemovalCheck(const std::string& podName, SteadyTime at) {
  const Duration delay = std::max(Duration::zero(), at - c_.d.scheduler.clock().now());
  if (auto it = removalChecks_.find(podName); it != removalChecks_.end()) {
    c_.d.scheduler.cancel(it->second);
  }
  removalChecks_[podName] = c_.strand.after(delay, [this, podName] {
    removalChecks_.erase(podName);
    if (c_.acting() && c_.indexOf(podName)) {
      queueRemoval(podName, "time to look again at a dead pod's ownership lease");
    }
  });
}

bool PodHealthMonitor::awaitingRemoval(const sharding::RegisteredPod& pod) const {
  return c_.leases.deathSeen.count(leaseKey(pod.name, pod.uid)) > 0;
}

}  // namespace kshard::manager
