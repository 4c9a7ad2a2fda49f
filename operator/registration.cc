#include "operator/registration.h"

#include <algorithm>
#include <utility>

namespace kshard::manager {

using sharding::ShardMap;

// Attempts of a register whose write met a Conflict before the caller is told to retry: each
// attempt reloads, so a second Conflict in a row means another writer is busy.
constexpr int kMaxRegisterAttempts = 3;

std::optional<Refusal> registerRefusal(const protocol::ShardMapRef& ref,
                                       const std::optional<PodInfo>& pod,
                                       const protocol::RegisterRequest& request) {
  const std::string who = ref.ns + "/" + request.pod;
  if (!pod.has_value()) {
    return Refusal{404, protocol::errors::kPodNotAlive, "pod " + who + " does not exist"};
  }
  const PodInfo& info = *pod;
  if (info.uid != request.uid) {
    return Refusal{403, protocol::errors::kPodNotAlive,
                   "pod " + who + " has uid " + info.uid + ", not " + request.uid +
                       ": the caller is an older pod of that name"};
  }
  if (assessPod(info, request.uid) == PodHealth::kDead) {
    return Refusal{403, protocol::errors::kPodNotAlive,
                   "pod " + who + " is in phase " + info.phase + ": it is not alive"};
  }
  // A terminating pod takes no shard: its sidecar registers again only after a drain that was
  // not followed by the pod's end, and this one will end.
  if (info.terminating) {
    return Refusal{403, protocol::errors::kPodNotAlive, "pod " + who + " is being deleted"};
  }
  auto label = info.labels.find(kShardMapLabel);
  if (label == info.labels.end() || label->second != ref.name) {
    return Refusal{403, protocol::errors::kForbidden,
                   "pod " + who + " is not labelled " + kShardMapLabel + "=" + ref.name};
  }
  const std::string host = request.address.substr(0, request.address.rfind(':'));
  if (info.podIp.empty()) {
    return Refusal{403, protocol::errors::kForbidden,
                   "pod " + who + " has no IP yet: its address cannot be checked"};
  }
  if (host != info.podIp && host != "[" + info.podIp + "]") {
    return Refusal{403, protocol::errors::kForbidden,
                   "address " + request.address + " is not on pod " + who + "'s IP " + info.podIp};
  }
  return std::nullopt;
}

std::vector<RegisterOutcome> applyRegistrations(
    ShardMap& map, sharding::ShardTable& table,
    const std::vector<protocol::RegisterRequest>& requests, std::int64_t fenceFloor,
    const std::function<bool(const sharding::RegisteredPod&)>& replacedMayRun) {
  const std::int64_t epoch = map.status.epoch;
  std::vector<RegisterOutcome> outcomes;
  for (const auto& request : requests) {
    auto& pods = map.status.pods;
    auto it = std::find_if(pods.begin(), pods.end(),
                           [&](const auto& p) { return p.name == request.pod; });
    RegisterOutcome outcome;
    if (it != pods.end() && it->uid == request.uid) {
      // The same pod again: its sidecar restarted (a new incarnation, which reset the app, so
      // nothing of the old one runs) or lost its registration. It keeps its shards, and assign
      // is re-sent to this incarnation.
      outcome.sameUid = true;
      it->address = request.address;
      it->version = request.version;
      it->incarnation = request.incarnation;
    } else if (it != pods.end() &&
               !table.shardsOf(static_cast<sharding::PodIndex>(it - pods.begin())).empty() &&
               replacedMayRun(*it)) {
      // A new pod of the same name while the registered one may still run somewhere (it was
      // removed without the kubelet confirming its end): its shards wait for its lease, and so
      // does this registration.
      outcome.deferred = true;
    } else {
      if (it != pods.end()) {
        // A new pod of the same name, and nothing of the registered one runs: its shards are
        // taken without acknowledgement.
        const auto idx = static_cast<sharding::PodIndex>(it - pods.begin());
        outcome.replaced = it->uid;
        const bool hadShards = !table.shardsOf(idx).empty();
        table.removePod(idx);
        pods.erase(it);
        // Epoch rule 1: the owners change.
        if (hadShards) map.status.epoch = std::max(epoch + 1, fenceFloor);
      }
      pods.push_back(sharding::RegisteredPod{request.pod, request.uid, request.address,
                                             request.version, 0, request.incarnation, std::nullopt});
    }
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

void Registration::registerPod(const protocol::RegisterRequest& request, const Reply& reply) {
  // The API decides whether the caller is who it says it is. Shardcake trusted a register from
  // a pod it had declared dead and lost data when that pod kept its shards.
  //
  // When the informer's cache already shows exactly that, it is the API's answer: a pod that
  // died since is reported by the informer and removed like any other dead pod, as it would be
  // had it died just after a fresh GET. Anything else (not cached yet, another uid, a refusal)
  // is decided by a fresh GET, so a lagging cache never refuses a new pod. Saving the GET
  // matters when many pods start at once: each costs a request of the client's QPS budget.
  if (!registerRefusal(c_.ref, c_.d.directory.cached(c_.ref.ns, request.pod), request)) {
    admit(request, reply);
    return;
  }
  c_.d.directory.fetch(
      c_.ref.ns, request.pod,
      c_.strand.wrap<StatusOr<std::optional<PodInfo>>>([this, request, reply](
                                                           StatusOr<std::optional<PodInfo>> pod) {
        if (!c_.leadingNow()) return reply(notLeaderResponse(""));
        if (!pod.ok()) {
          return reply(unavailableResponse("cannot check pod " + request.pod +
                                           " with the Kubernetes API: " + pod.status().message()));
        }
        if (auto refusal = registerRefusal(c_.ref, *pod, request)) {
          c_.log.warn("register refused",
                      {{"pod", request.pod}, {"uid", request.uid}, {"reason", refusal->message}});
          c_.event(EventType::kWarning, "RegisterRefused", refusal->message);
          return reply(http::Response::error(refusal->status, refusal->code, refusal->message));
        }
        admit(request, reply);
      }));
}

void Registration::admit(protocol::RegisterRequest request, Reply reply) {
  // Registrations that wait together are recorded together, in one status write: a thousand
  // pods starting at once cost a few writes of the large status instead of a thousand.
  const bool fits = openBatch_ && openBatch_->items.size() < kMaxBatch &&
                    std::none_of(openBatch_->items.begin(), openBatch_->items.end(),
                                 [&](const auto& item) { return item.first.pod == request.pod; });
  if (fits) {
    openBatch_->items.emplace_back(std::move(request), std::move(reply));
    return;
  }
  openBatch_ = std::make_shared<Batch>();
  openBatch_->items.emplace_back(std::move(request), std::move(reply));
  enqueue(openBatch_, 1, /*front=*/false);
}

void Registration::enqueue(const BatchPtr& batch, int attempt, bool front) {
  queue_.enqueue(OperationQueue::Op{"register",
                                    [this, batch, attempt](std::function<void()> done) {
                                      // Later callers start the next batch.
                                      if (openBatch_ == batch) openBatch_.reset();
                                      run(batch, attempt, std::move(done));
                                    },
                                    [batch](http::Response r) { batch->answerAll(r); }},
                 front);
}

void Registration::run(const BatchPtr& batch, int attempt, std::function<void()> done) {
  if (!c_.acting()) {
    batch->answerAll(c_.tookOver || !c_.leadingNow()
                         ? notLeaderResponse("")
                         : unavailableResponse("the leader is taking over; retry"));
    done();
    return;
  }
  c_.ensureFresh([this, batch, attempt, done](Status loaded) {
    if (!loaded.ok()) {
      batch->answerAll(
          unavailableResponse("cannot load ShardMap " + c_.key + ": " + loaded.message()));
      done();
      return;
    }
    record(batch, attempt, done);
  });
}

void Registration::record(const BatchPtr& batch, int attempt, std::function<void()> done) {
  auto table = c_.table();
  if (!table.ok()) {
    batch->answerAll(http::Response::error(500, "Internal", "stored status is invalid"));
    done();
    return;
  }
  ShardMap next = c_.current;
  std::vector<protocol::RegisterRequest> requests;
  for (const auto& item : batch->items) requests.push_back(item.first);
  auto outcomes =
      applyRegistrations(next, *table, requests, c_.fenceFloor, [this](const auto& pod) {
        if (health_.removal(pod, std::nullopt) != PodHealthMonitor::Removal::kLater) return false;
        health_.queueRemoval(pod.name, "replaced by a new pod of the same name");
        return true;
      });
  sharding::writeShardTable(*table, next.status);
  c_.setConditions(next, *table, c_.retryPending);
  if (next.status == c_.current.status) return answer(batch, outcomes, done);
  c_.persist(std::move(next), [this, batch, attempt, done, outcomes](Status written) {
    if (written.ok()) return answer(batch, outcomes, done);
    if (written.code() == StatusCode::kConflict && attempt < kMaxRegisterAttempts) {
      enqueue(batch, attempt + 1, /*front=*/true);
    } else {
      batch->answerAll(
          unavailableResponse("could not record the registration: " + written.message()));
    }
    done();
  });
}

void Registration::answer(const BatchPtr& batch, const std::vector<RegisterOutcome>& outcomes,
                          std::function<void()> done) {
  std::vector<std::string> resend;
  for (std::size_t i = 0; i < batch->items.size(); ++i) {
    const auto& [request, reply] = batch->items[i];
    const RegisterOutcome& outcome = outcomes[i];
    if (outcome.deferred) {
      reply(
          unavailableResponse("a pod named " + request.pod +
                              " with another uid is registered and may still run; its shards move "
                              "once its ownership lease has run out: retry"));
      continue;
    }
    // A new incarnation starts afresh; a restarted sidecar is reachable again. The register
    // confirms its ownership lease (the sidecar counts it from its request's start).
    c_.runtime[request.pod] = PodRuntime{};
    health_.recordGrant(request.pod, request.uid);
    reply(epochResponse(c_.current.status.epoch));
    if (outcome.sameUid) {
      resend.push_back(request.pod);
      continue;
    }
    c_.log.info("pod registered", {{"pod", request.pod},
                                   {"uid", request.uid},
                                   {"address", request.address},
                                   {"version", request.version}});
    c_.event(
        EventType::kNormal, "PodRegistered",
        "pod " + request.pod + " (version " +
            (request.version.empty() ? std::string("none") : request.version) + ") registered" +
            (outcome.replaced.empty() ? std::string() : "; it replaces uid " + outcome.replaced));
  }
  // The first pod gets every shard at once; otherwise a balancing round gives it a share.
  const bool unassigned = c_.current.status.unassignedCount > 0;
  resendEach(std::move(resend), [this, unassigned, done] {
    queue_.requestRound({unassigned, false});
    done();
  });
}

void Registration::resendEach(std::vector<std::string> pods, std::function<void()> then) {
  if (pods.empty()) {
    then();
    return;
  }
  const std::string pod = pods.back();
  pods.pop_back();
  resendAssign(pod, [this, pods = std::move(pods), then = std::move(then)]() mutable {
    resendEach(std::move(pods), std::move(then));
  });
}

void Registration::resendAssign(const std::string& podName, std::function<void()> done) {
  const auto idx = c_.indexOf(podName);
  auto table = c_.table();
  if (!idx || !table.ok() || !c_.acting()) return done();
  const sharding::ShardSet shards = table->shardsOf(*idx);
  if (shards.empty()) return done();
  if (c_.fenceFloor > c_.current.status.epoch) {
    // Epoch rule 3: an unassign went out at an epoch not yet persisted; an assign at the current
    // epoch could be refused. The round persists first, then assigns.
    queue_.requestRound({});
    return done();
  }
  const auto& pod = c_.pod(*idx);
  if (health_.awaitingRemoval(pod)) return done();
  // Epoch rule 3: re-sends carry the current persisted epoch.
  protocol::ShardsRequest req{c_.key, ControllerContext::targetOf(pod),
                              static_cast<protocol::Epoch>(c_.current.status.epoch), shards};
  c_.d.pods.assign(pod.address, req, c_.current.spec.shards, c_.current.spec.pingTimeout,
                   c_.strand.wrap<StatusOr<protocol::AssignResponse>>(
                       [this, podName, done](StatusOr<protocol::AssignResponse> r) {
                         if (!r.ok() || !r->refused.empty()) {
                           c_.log.warn("re-sent assign failed",
                                       {{"pod", podName},
                                        {"error", r.ok() ? "refused " + r->refused.toString()
                                                         : r.status().toString()}});
                           if (auto it = c_.runtime.find(podName); it != c_.runtime.end()) {
                             it->second.reachable = false;
                           }
                           queue_.retryRoundIn(c_.current.spec.rebalanceRetryInterval);
                         }
                         done();
                       }));
}

}  // namespace kshard::manager
