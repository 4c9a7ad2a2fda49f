// ShardMapController: the pods' ownership leases (operator/ownership_leases.h) — the renew call,
// and when the shards of a dead pod may be taken without its acknowledgement.
#include <algorithm>

#include "operator/ownership_leases.h"
#include "operator/shard_map_controller.h"

namespace kshard::manager {
namespace {

std::string leaseKey(const std::string& pod, const std::string& uid) { return pod + "/" + uid; }

http::Response refusedRenew(int status, std::string_view code, std::string message) {
  return http::Response::error(status, code, message);
}

}  // namespace

void ShardMapController::renew(protocol::Target target, Reply reply) {
  post([this, target = std::move(target), reply = std::move(reply)] {
    const SteadyTime now = d_.scheduler.clock().now();
    if (stopped_ ||
        !mayConfirmOwnership(d_.leadership, now, graceWithoutApi(current_.spec.ownershipLease))) {
      reply(notLeaderResponse(""));
      return;
    }
    const auto idx = indexOf(target.pod);
    if (!idx || current_.status.pods[static_cast<std::size_t>(*idx)].uid != target.uid) {
      reply(refusedRenew(404, protocol::errors::kPodNotAlive,
                         "pod " + target.pod + " (uid " + target.uid + ") is not registered"));
      return;
    }
    const sharding::RegisteredPod& pod = current_.status.pods[static_cast<std::size_t>(*idx)];
    if (pod.incarnation != target.incarnation) {
      reply(refusedRenew(409, protocol::errors::kWrongTarget,
                         "pod " + pod.name + " is registered by sidecar incarnation " +
                             pod.incarnation + ", not " + target.incarnation));
      return;
    }
    // A pod found dead (its object gone, replaced or finished, in the informer's view) is never
    // confirmed again: the wait for its lease to run out must not be extended by the pod itself. (While
    // the API server is down, the manager API lets a renew through on the token alone: this is
    // what stops a pod whose object is gone.)
    const std::string key = leaseKey(pod.name, pod.uid);
    const auto cached = d_.directory.cached(ref_.ns, pod.name);
    if (deathSeen_.count(key) || !cached || cached->uid != pod.uid || cached->phase == "Failed" ||
        cached->phase == "Succeeded") {
      reply(refusedRenew(404, protocol::errors::kPodNotAlive,
                         "pod " + pod.name + " (uid " + pod.uid + ") is gone"));
      return;
    }
    // Recorded before the answer: the sidecar counts its lease from when it sent this call, so
    // no later than now.
    recordGrant(pod.name, pod.uid);
    reply(http::Response::json(
        200, protocol::encode(protocol::EpochResponse{
                 static_cast<protocol::Epoch>(current_.status.epoch), std::nullopt})));
  });
}

void ShardMapController::recordGrant(const std::string& pod, const std::string& uid) {
  const std::string key = leaseKey(pod, uid);
  grants_[key] = d_.scheduler.clock().now();
  const auto cached = d_.directory.cached(ref_.ns, pod);
  if (cached && cached->uid == uid && cached->containersTerminated) {
    staleTermination_.insert(key);
  } else {
    staleTermination_.erase(key);
  }
}

ShardMapController::Removal ShardMapController::removal(const sharding::RegisteredPod& pod,
                                                        const std::optional<PodInfo>& observed) {
  const std::string key = leaseKey(pod.name, pod.uid);
  const SteadyTime now = d_.scheduler.clock().now();
  const Duration lease = current_.spec.ownershipLease;
  // The kubelet said that nothing of the pod runs, for good.
  const std::optional<PodInfo> last = observed ? observed : d_.directory.finalState(ref_.ns, pod.uid);
  const bool confirmed = last && terminationConfirmed(*last);
  if (confirmed && !staleTermination_.count(key)) return Removal::kNow;
  // Its sidecar answered an unassign of all its shards: they are released.
  if (released_.count(key)) return Removal::kNow;
  // A confirmation older than the sidecar's last word is waited out like a vanishing: the pod
  // gets no renewal any more (deathSeen_), and its lease runs out.
  if (observed && !confirmed) {
    // Finished, not confirmed, and the object still exists: the API server still takes its
    // token, so its lease may be renewed. Looked at again later.
    scheduleRemovalCheck(pod.name, now + lease);
    return Removal::kLater;
  }
  const auto [seen, first] = deathSeen_.try_emplace(key, now);
  const auto grant = grants_.find(key);
  const SteadyTime over = leaseSurelyOver(
      {lease, grant == grants_.end() ? std::nullopt : std::optional<SteadyTime>(grant->second),
       termStart_, seen->second});
  if (now >= over) return Removal::kNow;
  if (first) {
    const auto waitMs = std::chrono::duration_cast<std::chrono::milliseconds>(over - now).count();
    log_.warn("pod vanished without Kubernetes confirming its end; its shards move once its "
              "ownership lease has run out, or when its sidecar releases them",
              {{"pod", pod.name}, {"uid", pod.uid}, {"wait_ms", waitMs}});
    event(EventType::kWarning, "PodVanished",
          "pod " + pod.name + " (uid " + pod.uid +
              ") is gone but its containers were not reported terminated (a force delete or a "
              "lost node?): its shards move in at most " +
              std::to_string((waitMs + 999) / 1000) + " s, when its ownership lease has run out");
  }
  if (acting()) releaseDeadPod(pod);
  scheduleRemovalCheck(pod.name, over);
  return Removal::kLater;
}

void ShardMapController::releaseDeadPod(const sharding::RegisteredPod& pod) {
  const std::string key = leaseKey(pod.name, pod.uid);
  const auto idx = indexOf(pod.name);
  auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
  if (!idx || !table.ok() || !releasing_.insert(key).second) return;
  const sharding::ShardSet shards = table->shardsOf(*idx);
  // Epoch rules 2 and 3: at the epoch the removal will persist.
  const std::int64_t fence = std::max(current_.status.epoch + 1, fenceFloor_);
  fenceFloor_ = std::max(fenceFloor_, fence);
  protocol::ShardsRequest req{key_, targetOf(pod), static_cast<protocol::Epoch>(fence), shards};
  d_.pods.unassign(pod.address, req, current_.spec.handoffTimeout + current_.spec.pingTimeout,
                   onStrand<Status>([this, key, name = pod.name](Status s) {
                     releasing_.erase(key);
                     if (!s.ok()) {
                       log_.info("a vanished pod's sidecar did not release its shards",
                                 {{"pod", name}, {"error", s.toString()}});
                       return;
                     }
                     released_.insert(key);
                     queueRemoval(name, "its sidecar released its shards");
                   }));
}

void ShardMapController::scheduleRemovalCheck(const std::string& podName, SteadyTime at) {
  const Duration delay = std::max(Duration::zero(), at - d_.scheduler.clock().now());
  if (auto it = removalChecks_.find(podName); it != removalChecks_.end()) {
    d_.scheduler.cancel(it->second);
  }
  removalChecks_[podName] =
      d_.scheduler.runAfter(delay, [weak = weak_from_this(), podName] {
        auto self = weak.lock();
        if (!self) return;
        self->post([raw = self.get(), podName] {
          raw->removalChecks_.erase(podName);
          if (raw->acting() && raw->indexOf(podName)) {
            raw->queueRemoval(podName, "time to look again at a dead pod's ownership lease");
          }
        });
      });
}

bool ShardMapController::awaitingRemoval(const sharding::RegisteredPod& pod) const {
  return deathSeen_.count(leaseKey(pod.name, pod.uid)) > 0;
}

void ShardMapController::forgetLeases() {
  std::set<std::string> registered;
  for (const auto& p : current_.status.pods) registered.insert(leaseKey(p.name, p.uid));
  const auto gone = [&](const std::string& key) { return registered.count(key) == 0; };
  std::erase_if(grants_, [&](const auto& e) { return gone(e.first); });
  std::erase_if(deathSeen_, [&](const auto& e) { return gone(e.first); });
  std::erase_if(staleTermination_, gone);
  std::erase_if(released_, gone);
}

}  // namespace kshard::manager
