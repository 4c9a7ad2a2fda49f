#include "operator/pod_health_monitor.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace kshard::manager {

using sharding::PodIndex;
using sharding::ShardMap;

Inspection inspection(const StatusOr<std::optional<PodInfo>>& fetched,
                      const std::string& registeredUid) {
  Inspection i;
  i.health = fetched.ok() ? assessPod(*fetched, registeredUid) : PodHealth::kAlive;
  if (fetched.ok() && fetched->has_value() && (*fetched)->uid == registeredUid) {
    i.observed = **fetched;
  }
  return i;
}

DroppedPods dropDeadPods(ShardMap& map, sharding::ShardTable& table,
                         const std::map<std::string, Inspection>& seen,
                         const std::function<bool(const sharding::RegisteredPod&,
                                                  const std::optional<PodInfo>&)>& keep) {
  DroppedPods out;
  for (auto i = static_cast<PodIndex>(map.status.pods.size()) - 1; i >= 0; --i) {
    const auto pod = map.status.pods[static_cast<std::size_t>(i)];
    auto found = seen.find(pod.name);
    if (found == seen.end() || found->second.health != PodHealth::kDead) continue;
    const bool hasShards = !table.shardsOf(i).empty();
    if (hasShards && keep(pod, found->second.observed)) continue;
    out.hadShards |= hasShards;
    table.removePod(i);
    map.status.pods.erase(map.status.pods.begin() + i);
    out.pods.push_back(pod);
  }
  return out;
}

std::int64_t epochAfterRemoval(std::int64_t epoch, std::int64_t fenceFloor, bool hadShards) {
  if (hadShards || fenceFloor > epoch) return std::max(epoch + 1, fenceFloor);
  return epoch;
}

// ---------------------------------------------------------------------------------------------
// Suspects

void PodHealthMonitor::podChanged(const std::string& podName) {
  if (!c_.acting()) return;
  const auto idx = c_.indexOf(podName);
  if (!idx) return;
  const auto& pod = c_.pod(*idx);
  const PodHealth health = assessPod(c_.d.directory.cached(c_.ref.ns, podName), pod.uid);
  c_.runtime[podName].terminating = health == PodHealth::kTerminating;
  // Death from the informer is confirmed with a fresh GET before the shards are taken.
  if (health == PodHealth::kDead) queueRemoval(podName, "the pod informer saw it die");
}

void PodHealthMonitor::notifyUnhealthy(const protocol::NotifyUnhealthyRequest& request,
                                       const Reply& accepted) {
  accepted(http::Response::json(202, R"({"accepted":true})"));
  const auto idx = c_.indexOf(request.pod);
  if (!idx || !checksInFlight_.insert(request.pod).second) return;
  const std::string name = request.pod;
  const std::string address = c_.pod(*idx).address;
  c_.log.info("pod reported unhealthy", {{"pod", name}});
  // Shardcake's rule: ask the health API; only a dead pod loses its shards. An alive pod that
  // does not answer just gets no new shards until it answers a ping again.
  checkPods({name}, [this, name, address](std::map<std::string, PodHealth> health) {
    if (health[name] == PodHealth::kDead) {
      checksInFlight_.erase(name);
      queueRemoval(name, "reported unhealthy and the API shows it dead");
      return;
    }
    pingUnhealthy(name, address);
  });
}

void PodHealthMonitor::pingUnhealthy(const std::string& name, const std::string& address) {
  const auto registered = c_.indexOf(name);
  if (!registered) {
    checksInFlight_.erase(name);
    return;
  }
  c_.d.pods.ping(
      address, c_.key, ControllerContext::targetOf(c_.pod(*registered)),
      c_.current.spec.pingTimeout,
      c_.strand.wrap<StatusOr<protocol::PingResponse>>(
          [this, name](StatusOr<protocol::PingResponse> r) {
            checksInFlight_.erase(name);
            if (!c_.indexOf(name)) return;
            c_.runtime[name].reachable = r.ok() && r->pod == name;
            if (!c_.runtime[name].reachable) {
              c_.log.warn("pod alive but unreachable; it gets no new shards", {{"pod", name}});
            }
          }));
}

void PodHealthMonitor::checkPods(std::set<std::string> names,
                                 std::function<void(std::map<std::string, PodHealth>)> then) {
  inspectPods(std::move(names), [then](std::map<std::string, Inspection> seen) {
    std::map<std::string, PodHealth> health;
    for (const auto& [name, i] : seen) health[name] = i.health;
    then(std::move(health));
  });
}

void PodHealthMonitor::inspectPods(std::set<std::string> names,
                                   std::function<void(std::map<std::string, Inspection>)> then) {
  if (names.empty()) {
    then({});
    return;
  }
  struct Check {
    std::map<std::string, Inspection> seen;
    std::size_t outstanding = 0;
  };
  auto check = std::make_shared<Check>();
  check->outstanding = names.size();
  for (const auto& name : names) {
    const auto idx = c_.indexOf(name);
    const std::string uid = idx ? c_.pod(*idx).uid : std::string();
    c_.d.directory.fetch(c_.ref.ns, name,
                         c_.strand.wrap<StatusOr<std::optional<PodInfo>>>(
                             [this, check, name, uid, then](StatusOr<std::optional<PodInfo>> pod) {
                               check->seen[name] = inspection(pod, uid);
                               if (!pod.ok()) {
                                 c_.log.warn("cannot check pod with the API",
                                             {{"pod", name}, {"error", pod.status().toString()}});
                               }
                               if (--check->outstanding == 0) then(check->seen);
                             }));
  }
}

// ---------------------------------------------------------------------------------------------
// Removal of dead pods

void PodHealthMonitor::queueRemoval(const std::string& podName, std::string reason) {
  if (!removalsQueued_.insert(podName).second) return;
  c_.log.info("pod suspected dead; checking with the API", {{"pod", podName}, {"reason", reason}});
  if (removalOpQueued_) return;
  removalOpQueued_ = true;
  queue_.enqueue(OperationQueue::Op{"remove-dead",
                                    [this](std::function<void()> done) {
                                      removalOpQueued_ = false;
                                      std::set<std::string> names;
                                      names.swap(removalsQueued_);
                                      removeDead(std::move(names), std::move(done));
                                    },
                                    nullptr},
                 /*front=*/true);
}

void PodHealthMonitor::removeDead(std::set<std::string> candidates, std::function<void()> done) {
  if (!c_.acting()) {
    done();
    return;
  }
  c_.ensureFresh([this, candidates, done](Status loaded) {
    if (!loaded.ok()) {
      queue_.retryRoundIn(c_.current.spec.rebalanceRetryInterval);
      done();
      return;
    }
    std::set<std::string> registered;
    for (const auto& name : candidates) {
      if (c_.indexOf(name)) registered.insert(name);
    }
    inspectPods(registered, [this, done](std::map<std::string, Inspection> seen) {
      removeInspected(std::move(seen), done);
    });
  });
}

void PodHealthMonitor::removeInspected(std::map<std::string, Inspection> seen,
                                       std::function<void()> done) {
  if (!c_.acting()) {
    done();
    return;
  }
  auto table = c_.table();
  if (!table.ok()) {
    done();
    return;
  }
  ShardMap next = c_.current;
  // Only the shards of a dead pod of which nothing runs are taken without its acknowledgement:
  // the kubelet confirmed its end, its ownership lease has run out, or its sidecar released
  // them. Otherwise it stays until one of these is true.
  const DroppedPods dead =
      dropDeadPods(next, *table, seen, [this](const auto& pod, const auto& observed) {
        return removal(pod, observed) == Removal::kLater;
      });
  if (dead.pods.empty()) {
    done();
    return;
  }
  sharding::writeShardTable(*table, next.status);
  // Epoch rule 1: the owners change.
  next.status.epoch = epochAfterRemoval(c_.current.status.epoch, c_.fenceFloor, dead.hadShards);
  c_.setConditions(next, *table, c_.retryPending);
  c_.persist(std::move(next), [this, done, dead = dead.pods](Status written) {
    if (!written.ok()) {
      for (const auto& p : dead) queueRemoval(p.name, "retry after a failed write");
      done();
      return;
    }
    for (const auto& p : dead) {
      c_.d.pods.forget(p.address);
      c_.log.warn("pod is dead; its shards are reassigned", {{"pod", p.name}, {"uid", p.uid}});
      c_.event(EventType::kWarning, "PodDead",
               "pod " + p.name + " (uid " + p.uid + ", " + std::to_string(p.shards) +
                   " shards) is gone; its shards are reassigned without its acknowledgement");
    }
    queue_.requestRound({true, false});
    done();
  });
}

}  // namespace kshard::manager
