#include "operator/takeover.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

namespace kshard::manager {

using sharding::ShardMap;

void Takeover::enqueue() {
  queue_.enqueue(
      OperationQueue::Op{"takeover", [this](std::function<void()> done) { run(std::move(done)); },
                         nullptr},
      /*front=*/true);
}

void Takeover::run(std::function<void()> done) {
  if (!c_.leadingNow()) {
    done();
    return;
  }
  // A new leader reads the map fresh (a quorum read): what the previous leader persisted last is
  // the truth, whatever the informer showed.
  c_.stale = true;
  c_.ensureFresh([this, done](Status loaded) {
    if (!loaded.ok()) {
      scheduleRetry();
      done();
      return;
    }
    std::set<std::string> suspects;
    for (const auto& p : c_.current.status.pods) {
      const auto cached = c_.d.directory.cached(c_.ref.ns, p.name);
      const PodHealth health = assessPod(cached, p.uid);
      c_.runtime[p.name] = PodRuntime{true, health == PodHealth::kTerminating, false};
      if (health == PodHealth::kDead) suspects.insert(p.name);
    }
    health_.inspectPods(suspects, [this, done](std::map<std::string, Inspection> seen) {
      claim(std::move(seen), done);
    });
  });
}

void Takeover::claim(std::map<std::string, Inspection> seen, std::function<void()> done) {
  if (!c_.leadingNow()) {
    done();
    return;
  }
  ShardMap next = c_.current;
  auto table = sharding::shardTableFromStatus(next.status, next.spec.shards);
  if (!table.ok()) {
    c_.log.error("stored status is invalid; not acting on this ShardMap",
                 {{"error", table.status().toString()}});
    c_.event(EventType::kWarning, "InvalidStatus", table.status().message());
    scheduleRetry();
    done();
    return;
  }
  // Dropped now only when nothing of it may run; the others wait for their ownership lease in a
  // removal after the takeover (removal() decides; acting() is still false here, so it sends
  // nothing).
  const DroppedPods dropped =
      dropDeadPods(next, *table, seen, [this](const auto& pod, const auto& observed) {
        if (health_.removal(pod, observed) != PodHealthMonitor::Removal::kLater) return false;
        health_.queueRemoval(pod.name, "dead when this replica took over");
        return true;
      });
  sharding::writeShardTable(*table, next.status);
  // Epoch rule 3: the previous leader may have sent unassigns at (its epoch + 1) that it never
  // persisted. Bumping the epoch here, in the write that claims status.manager, makes every
  // assign this leader sends at least as new as those fences.
  next.status.epoch = std::max(c_.current.status.epoch + 1, c_.fenceFloor);
  next.status.manager = c_.d.self;
  c_.setConditions(next, *table, c_.retryPending);
  c_.persist(std::move(next), [this, done, count = dropped.pods.size()](Status written) {
    if (!written.ok()) {
      if (written.code() == StatusCode::kConflict && ++c_.consecutiveConflicts < 3) {
        enqueue();
      } else {
        scheduleRetry();
      }
      done();
      return;
    }
    c_.tookOver = true;
    c_.log.info("took over the ShardMap", {{"epoch", c_.current.status.epoch},
                                           {"pods", c_.current.status.pods.size()},
                                           {"dropped_dead_pods", count}});
    c_.event(
        EventType::kNormal, "LeaderTookOver",
        c_.d.self.pod + " leads this ShardMap at epoch " + std::to_string(c_.current.status.epoch) +
            (count == 0 ? std::string() : "; dropped " + std::to_string(count) + " dead pods"));
    // Epoch rule 3: re-send every stored assignment at the new epoch (after the ping confirms
    // each pod is still the one registered).
    queue_.requestRound({count != 0, true});
    done();
  });
}

void Takeover::scheduleRetry() {
  queue_.retryIn(c_.current.spec.rebalanceRetryInterval, [this] {
    if (!c_.leadingNow() || c_.tookOver) return;
    enqueue();
  });
}

}  // namespace kshard::manager
