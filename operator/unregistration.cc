#include "operator/unregistration.h"

#include <algorithm>
#include <set>
#include <utility>

namespace kshard::manager {

using sharding::ShardMap;

// Attempts of an unregister whose write met a Conflict before the caller is told to retry: each
// attempt reloads, so a second Conflict in a row means another writer is busy.
constexpr int kMaxUnregisterAttempts = 3;

http::Response deferredResponse(const std::string& pod, const UnregisterHold& hold,
                                std::chrono::milliseconds remaining) {
  protocol::UnregisterDeferred body;
  body.message =
      hold.startingPods == 0
          ? "pod " + pod + " keeps its shards for " + std::to_string(remaining.count() / 1000) +
                " s more, until pods created with its delete would be seen; keep serving and "
                "ask again"
          : "pod " + pod + " keeps its shards until the " + std::to_string(hold.startingPods) +
                " starting pod(s) of version " +
                (hold.version.empty() ? std::string("\"\"") : hold.version) +
                " have registered, for at most " + std::to_string(remaining.count() / 1000) +
                " s more; keep serving and ask again";
  body.retryAfterMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(kHoldRetryAfter).count();
  body.deferredForMs = remaining.count();
  body.version = hold.version;
  body.startingPods = hold.startingPods;
  http::Response answer = http::Response::json(409, protocol::encode(body));
  answer.headers.set(
      "Retry-After",
      std::to_string(std::chrono::ceil<std::chrono::seconds>(kHoldRetryAfter).count()));
  return answer;
}

http::Response unassignFailedResponse(const Status& failure) {
  const bool timedOut = failure.code() == StatusCode::kDeadlineExceeded;
  return http::Response::error(
      timedOut ? 504 : 503,
      timedOut ? protocol::errors::kHandoffTimeout : std::string_view("Unavailable"),
      "could not unassign the pod's shards before removing it (" + failure.toString() +
          "); it keeps them; retry the unregister");
}

// ---------------------------------------------------------------------------------------------
// The hold

void Unregistration::unregisterPod(const protocol::UnregisterRequest& request, const Reply& reply) {
  // The hold needs the pod's deletion deadline, and the sidecar whether its pod is being
  // deleted. The informer has it, unless the unregister arrived before the informer heard of
  // the delete: then the API is asked.
  std::optional<PodInfo> cached = c_.d.directory.cached(c_.ref.ns, request.pod);
  if (!c_.acting() || !c_.indexOf(request.pod).has_value() || (cached && cached->terminating)) {
    proceed(request, reply, cached);
    return;
  }
  c_.d.directory.fetch(c_.ref.ns, request.pod,
                       c_.strand.wrap<StatusOr<std::optional<PodInfo>>>(
                           [this, request, reply, cached](StatusOr<std::optional<PodInfo>> pod) {
                             if (!c_.leadingNow()) return reply(notLeaderResponse(""));
                             // Without the API's answer, the cache is the best knowledge.
                             proceed(request, reply, pod.ok() ? *pod : cached);
                           }));
}

void Unregistration::proceed(const protocol::UnregisterRequest& request, const Reply& reply,
                             const std::optional<PodInfo>& observed) {
  if (auto answer = deferral(request, observed)) return reply(std::move(*answer));
  // The answer tells the sidecar whether a termination follows its drain.
  const bool terminating = observed && observed->uid == request.uid && observed->terminating;
  Reply answer = [reply, terminating](http::Response response) {
    if (response.status == 200) {
      auto e = protocol::decodeEpochResponse(response.body);
      if (e.ok()) response = epochResponse(static_cast<std::int64_t>(e->epoch), terminating);
    }
    reply(std::move(response));
  };
  enqueue(request, answer, 1, /*front=*/false);
}

std::optional<http::Response> Unregistration::deferral(const protocol::UnregisterRequest& request,
                                                       const std::optional<PodInfo>& observed) {
  const auto idx = c_.indexOf(request.pod);
  if (!c_.acting() || !idx) return std::nullopt;
  const sharding::RegisteredPod& pod = c_.pod(*idx);
  if (pod.uid != request.uid) return std::nullopt;
  const WallTime now = c_.d.scheduler.clock().wallNow();
  const auto hold =
      unregisterHold(c_.current, pod, observed, starting(), c_.d.maxUnregisterHold, now);
  if (!hold) {
    if (auto it = held_.find(pod.name); it != held_.end()) {
      c_.log.info("unregister no longer held",
                  {{"pod", pod.name},
                   {"held_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                   c_.d.scheduler.clock().now() - it->second)
                                   .count()}});
      held_.erase(it);
    }
    return std::nullopt;
  }
  const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(hold->until - now);
  if (held_.emplace(pod.name, c_.d.scheduler.clock().now()).second) {
    c_.log.info(hold->startingPods == 0
                    ? "unregister held until pods created with its delete would be seen"
                    : "unregister held while newer pods start",
                {{"pod", pod.name},
                 {"version", hold->version},
                 {"starting_pods", hold->startingPods},
                 {"at_most_ms", remaining.count()}});
  }
  return deferredResponse(pod.name, *hold, remaining);
}

const std::vector<std::string>& Unregistration::starting() {
  if (!startingMemo_ || startingMemo_->podsGeneration != podsGeneration_ ||
      startingMemo_->resourceVersion != c_.current.metadata.resourceVersion) {
    startingMemo_ =
        StartingMemo{podsGeneration_, c_.current.metadata.resourceVersion,
                     startingVersions(c_.current, c_.d.directory.podsOf(c_.ref.ns, c_.ref.name))};
    // Forget holds of pods that are gone from the map (removed as dead while held).
    std::erase_if(held_, [this](const auto& entry) { return !c_.indexOf(entry.first); });
  }
  return startingMemo_->versions;
}

// ---------------------------------------------------------------------------------------------
// The operation

void Unregistration::enqueue(const protocol::UnregisterRequest& request, const Reply& reply,
                             int attempt, bool front) {
  queue_.enqueue(OperationQueue::Op{"unregister",
                                    [this, request, reply, attempt](std::function<void()> done) {
                                      run(request, reply, attempt, std::move(done));
                                    },
                                    reply},
                 front);
}

void Unregistration::run(const protocol::UnregisterRequest& request, const Reply& reply,
                         int attempt, std::function<void()> done) {
  if (!c_.acting()) {
    reply(c_.tookOver || !c_.leadingNow()
              ? notLeaderResponse("")
              : unavailableResponse("the leader is taking over; retry"));
    done();
    return;
  }
  c_.ensureFresh([this, request, reply, attempt, done](Status loaded) {
    if (!loaded.ok()) {
      reply(unavailableResponse("cannot load ShardMap " + c_.key + ": " + loaded.message()));
      done();
      return;
    }
    release(request, reply, attempt, done);
  });
}

// Epoch rule 5: unassign from the pod itself first. A draining pod answers at once; a caller
// that unregisters without draining gets its entities stopped here before anyone else may take
// the shards.
void Unregistration::release(const protocol::UnregisterRequest& request, const Reply& reply,
                             int attempt, std::function<void()> done) {
  const auto idx = c_.indexOf(request.pod);
  if (!idx) {
    // Already out (a retried unregister, or removed as dead): nothing to do.
    reply(epochResponse(c_.current.status.epoch));
    return done();
  }
  const sharding::RegisteredPod pod = c_.pod(*idx);
  if (pod.uid != request.uid) {
    reply(http::Response::error(404, protocol::errors::kPodNotAlive,
                                "pod " + request.pod + " with uid " + request.uid +
                                    " is not registered; the registered pod of that name has "
                                    "uid " +
                                    pod.uid));
    return done();
  }
  c_.runtime[pod.name].leaving = true;
  auto table = c_.table();
  if (!table.ok()) {
    reply(http::Response::error(500, "Internal", "stored status is invalid"));
    return done();
  }
  const sharding::ShardSet shards = table->shardsOf(*idx);
  if (shards.empty()) return removeAndPersist(request, reply, attempt, pod, done);
  // Epoch rule 2: at the epoch the removal will persist.
  const std::int64_t fence = c_.current.status.epoch + 1;
  c_.fenceFloor = std::max(c_.fenceFloor, fence);
  protocol::ShardsRequest req{c_.key, ControllerContext::targetOf(pod),
                              static_cast<protocol::Epoch>(fence), shards};
  c_.d.pods.unassign(pod.address, req, c_.current.spec.handoffTimeout + c_.current.spec.pingTimeout,
                     c_.strand.wrap<UnassignAnswer>([this, request, reply, attempt, done,
                                                     pod](UnassignAnswer answer) {
                       const Status& s = answer.status;
                       if (!c_.acting()) {
                         reply(notLeaderResponse(""));
                         return done();
                       }
                       if (s.ok()) return removeAndPersist(request, reply, attempt, pod, done);
                       c_.log.warn("unassign before unregister failed",
                                   {{"pod", pod.name}, {"error", s.toString()}});
                       releaseFailed(request, reply, attempt, pod, s, done);
                     }));
}

// Without the pod's acknowledgement its shards may be taken only if it is dead, and surely runs
// nothing.
void Unregistration::releaseFailed(const protocol::UnregisterRequest& request, const Reply& reply,
                                   int attempt, const sharding::RegisteredPod& pod,
                                   const Status& failure, std::function<void()> done) {
  health_.inspectPods({pod.name}, [this, request, reply, attempt, done, pod,
                                   failure](std::map<std::string, Inspection> seen) {
    const Inspection& i = seen[pod.name];
    if (i.health == PodHealth::kDead &&
        health_.removal(pod, i.observed) == PodHealthMonitor::Removal::kNow) {
      return removeAndPersist(request, reply, attempt, pod, done);
    }
    if (i.health == PodHealth::kDead) health_.queueRemoval(pod.name, "died while unregistering");
    reply(unassignFailedResponse(failure));
    // Epoch rule 3: the unassign went out at an epoch not yet persisted; the round persists
    // it before any further assign.
    queue_.requestRound({});
    done();
  });
}

void Unregistration::removeAndPersist(const protocol::UnregisterRequest& request,
                                      const Reply& reply, int attempt,
                                      const sharding::RegisteredPod& pod,
                                      std::function<void()> done) {
  auto t = c_.table();
  const auto i = c_.indexOf(pod.name);
  if (!t.ok() || !i) {
    reply(epochResponse(c_.current.status.epoch));
    return done();
  }
  ShardMap next = c_.current;
  const bool hadShards = !t->shardsOf(*i).empty();
  t->removePod(*i);
  next.status.pods.erase(next.status.pods.begin() + *i);
  sharding::writeShardTable(*t, next.status);
  // Epoch rules 1 and 5: the pod's shards become unassigned at the epoch its unassign carried.
  next.status.epoch = epochAfterRemoval(c_.current.status.epoch, c_.fenceFloor, hadShards);
  c_.setConditions(next, *t, c_.retryPending);
  c_.persist(std::move(next), [this, request, reply, attempt, done, pod](Status written) {
    if (!written.ok()) {
      if (written.code() == StatusCode::kConflict && attempt < kMaxUnregisterAttempts) {
        enqueue(request, reply, attempt + 1, /*front=*/true);
      } else {
        reply(unavailableResponse("could not record the unregistration: " + written.message()));
      }
      return done();
    }
    reply(epochResponse(c_.current.status.epoch));
    c_.d.pods.forget(pod.address);
    c_.log.info("pod unregistered", {{"pod", pod.name}, {"epoch", c_.current.status.epoch}});
    c_.event(EventType::kNormal, "PodUnregistered",
             "pod " + pod.name + " unregistered; its shards are reassigned");
    // The immediate round places the pod's shards on the others.
    queue_.requestRound({true, false});
    done();
  });
}

}  // namespace kshard::manager
