#include "operator/shard_map_controller.h"

#include <utility>

#include "sharding/shard_map_json.h"
#include "sharding/shard_map_segments.h"

namespace kshard::manager {

using sharding::ShardMap;

std::shared_ptr<ShardMapController> ShardMapController::create(ControllerDeps deps,
                                                               ShardMap observed) {
  auto controller = std::shared_ptr<ShardMapController>(
      new ShardMapController(std::move(deps), std::move(observed)));
  controller->c_.strand.bind(controller);
  return controller;
}

ShardMapController::ShardMapController(ControllerDeps deps, ShardMap observed)
    : c_(std::move(deps), std::move(observed)) {
  queue_.setRoundStarter([this](RoundRequest request, std::function<void()> done) {
    rounds_.run(request, std::move(done));
  });
}

void ShardMapController::leaderCall(Reply reply, std::function<void(Reply)> body) {
  c_.strand.post([this, reply = std::move(reply), body = std::move(body)] {
    if (!c_.leadingNow()) {
      reply(notLeaderResponse(""));
      return;
    }
    body(reply);
  });
}

void ShardMapController::observe(ShardMap observed) {
  c_.strand.post([this, observed = std::move(observed)]() mutable {
    if (!c_.leading) {
      // Followers mirror the informer: they answer NotLeader with status.manager.
      c_.adopt(std::move(observed));
      return;
    }
    // The leader is the only writer of the status, and its own writes come back through the
    // informer possibly after later ones: only a spec change (new generation) matters here, and
    // it is read fresh from the store before the next operation.
    if (observed.metadata.generation != c_.current.metadata.generation) {
      c_.stale = true;
      queue_.requestRound({});
    }
  });
}

void ShardMapController::startLeading() {
  c_.strand.post([this] {
    if (c_.stopped || c_.leading) return;
    c_.leading = true;
    c_.tookOver = false;
    c_.termStart = c_.d.scheduler.clock().now();
    // Figures from an earlier term may be hours old: the term's first rounds measure afresh.
    c_.loads = ShardLoads{};
    // Failures counted in an earlier term may be about shards that moved since: start afresh.
    c_.throttle = HandoffThrottle{};
    takeover_.enqueue();
  });
}

void ShardMapController::stopLeading() {
  c_.strand.post([this] {
    if (!c_.leading) return;
    c_.leading = false;
    c_.tookOver = false;
    health_.forgetReleases();
    registration_.closeBatch();
    queue_.cancelAll(notLeaderResponse(""));
    // A read waiting for a version is not answered from this replica's view any more.
    for (auto& read : c_.waitingReads) read.reply(notLeaderResponse(""));
    c_.waitingReads.clear();
    c_.history.clear();
    health_.dropQueuedRemovals();
    c_.d.metrics.observeThrottled(c_.key, 0);  // the leader's figure, not a follower's
    c_.log.info("leadership lost; stopping");
  });
}

void ShardMapController::shutdown() {
  c_.strand.post([this] {
    c_.stopped = true;
    registration_.closeBatch();
    const auto gone = http::Response::error(404, protocol::errors::kUnknownShardMap,
                                            "ShardMap " + c_.key + " was deleted");
    queue_.cancelAll(gone);
    for (auto& read : c_.waitingReads) read.reply(gone);
    c_.waitingReads.clear();
  });
}

void ShardMapController::podChanged(const std::string& podName) {
  c_.strand.post([this, podName] {
    unregistration_.podsChanged();
    health_.podChanged(podName);
  });
}

void ShardMapController::registerPod(protocol::RegisterRequest request, Reply reply) {
  leaderCall(std::move(reply), [this, request = std::move(request)](const Reply& r) {
    registration_.registerPod(request, r);
  });
}

void ShardMapController::unregisterPod(protocol::UnregisterRequest request, Reply reply) {
  leaderCall(std::move(reply), [this, request = std::move(request)](const Reply& r) {
    unregistration_.unregisterPod(request, r);
  });
}

void ShardMapController::notifyUnhealthy(protocol::NotifyUnhealthyRequest request, Reply reply) {
  leaderCall(std::move(reply), [this, request = std::move(request)](const Reply& r) {
    health_.notifyUnhealthy(request, r);
  });
}

// A replica that holds only the head of a segmented map (a follower's copy, before the takeover
// reads the whole map) has no pods to confirm or serve: it answers as a replica that does not
// lead yet, and the caller asks again or reads the API server.
bool ShardMapController::headOnly(const Reply& reply) const {
  if (!sharding::isSegmentedHead(c_.current.status)) return false;
  reply(notLeaderResponse(""));
  return true;
}

void ShardMapController::renew(protocol::Target target, Reply reply) {
  c_.strand.post([this, target = std::move(target), reply = std::move(reply)] {
    if (headOnly(reply)) return;
    health_.renew(target, reply);
  });
}

void ShardMapController::reportRefusedCaller(std::string reason, std::string message) {
  c_.strand.post([this, reason = std::move(reason), message = std::move(message)]() mutable {
    c_.event(EventType::kWarning, std::move(reason), std::move(message));
  });
}

void ShardMapController::assignments(Reply reply) {
  c_.strand.post([this, reply = std::move(reply)] {
    if (headOnly(reply)) return;
    reply(http::Response::json(200, sharding::toJson(c_.current).dump()));
  });
}

void ShardMapController::changes(std::string since, std::string want, Reply reply) {
  c_.strand.post([this, since = std::move(since), want = std::move(want),
                  reply = std::move(reply)]() mutable {
    if (headOnly(reply)) return;
    c_.answerChanges(std::move(since), std::move(want), std::move(reply));
  });
}

bool ShardMapController::lists(const std::string& pod, const std::string& uid) const {
  std::lock_guard lock(c_.mu);
  const auto i = c_.indexOf(pod);
  return i && c_.pod(*i).uid == uid;
}

std::optional<sharding::ManagerRef> ShardMapController::storedManager() const {
  std::lock_guard lock(c_.mu);
  return c_.storedManager;
}

}  // namespace kshard::manager
