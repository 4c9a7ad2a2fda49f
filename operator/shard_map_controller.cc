#include "operator/shard_map_controller.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>

#include "kube/api_time.h"
#include "operator/shard_map_conditions.h"
#include "operator/unregister_hold.h"
#include "sharding/shard_map_json.h"

namespace kshard::manager {
namespace {

using sharding::PodIndex;
using sharding::ShardMap;
using sharding::ShardSet;
using sharding::ShardTable;

// Attempts of a register/unregister whose write met a Conflict before the caller is told to
// retry: each attempt reloads, so a second Conflict in a row means another writer is busy.
constexpr int kMaxWriteAttempts = 3;

http::Response epochResponse(std::int64_t epoch, std::optional<bool> terminating = std::nullopt) {
  return http::Response::json(200, protocol::encode(protocol::EpochResponse{
                                       static_cast<protocol::Epoch>(epoch), terminating}));
}

http::Response unavailable(std::string_view message) {
  return http::Response::error(503, "Unavailable", message);
}

double secondsSince(const Clock& clock, SteadyTime start) {
  return std::chrono::duration<double>(clock.now() - start).count();
}

std::string describe(const Status& s) { return s.toString(); }

std::string joinNames(const std::map<std::string, std::string>& failed) {
  std::string out;
  for (const auto& [name, why] : failed) {
    if (!out.empty()) out += "; ";
    out += name + ": " + why;
  }
  return out;
}

}  // namespace

http::Response notLeaderResponse(const std::string& leaderAddress) {
  nlohmann::json body{
      {"error",
       {{"code", protocol::errors::kNotLeader},
        {"message", leaderAddress.empty()
                        ? "this replica is not the leader; the leader is unknown"
                        : "this replica is not the leader; call " + leaderAddress}}}};
  if (!leaderAddress.empty()) body["leader"] = leaderAddress;
  return http::Response::json(503, body.dump());
}

struct ShardMapController::Round {
  std::uint64_t id = 0;
  RoundRequest request;
  SteadyTime started{};
  std::function<void()> done;
  ShardTable table{1};
  std::int64_t epoch = 0;  // status.epoch when the round started
  std::vector<Move> moves;
  std::vector<PingOutcome> pings;
  RoundPlan plan;
  std::set<PodIndex> unassignFailed;
  std::optional<RoundCommit> commit;
  std::map<std::string, std::string> failed;  // pod name -> what failed
  std::size_t outstanding = 0;
};

std::shared_ptr<ShardMapController> ShardMapController::create(ControllerDeps deps,
                                                               ShardMap observed) {
  return std::shared_ptr<ShardMapController>(
      new ShardMapController(std::move(deps), std::move(observed)));
}

ShardMapController::ShardMapController(ControllerDeps deps, ShardMap observed)
    : d_(std::move(deps)),
      ref_{observed.metadata.namespace_, observed.metadata.name},
      key_(ref_.toString()),
      log_(d_.logger.withFields({{"shard_map", ref_.toString()}})),
      current_(std::move(observed)) {
  storedManager_ = current_.status.manager;
}

ShardMapController::~ShardMapController() {
  d_.scheduler.cancel(periodicTimer_);
  d_.scheduler.cancel(retryTimer_);
}

// ---------------------------------------------------------------------------------------------
// Strand plumbing

void ShardMapController::post(std::function<void()> task) {
  d_.scheduler.runAfter(Duration{0}, [weak = weak_from_this(), task = std::move(task)] {
    auto self = weak.lock();
    if (!self) return;
    std::lock_guard lock(self->mu_);
    task();
  });
}

template <typename T>
std::function<void(T)> ShardMapController::onStrand(std::function<void(T)> fn) {
  return [weak = weak_from_this(), fn = std::move(fn)](T result) {
    auto self = weak.lock();
    if (!self) return;
    self->post([fn, result = std::move(result)]() mutable { fn(std::move(result)); });
  };
}

bool ShardMapController::acting() const {
  // Epoch rule 7: the lease is checked at every step, not only when leadership events arrive:
  // a replica whose renewals fail stops acting at its renew deadline, before another replica
  // can acquire the lease.
  return leading_ && tookOver_ && !stopped_ && d_.leadership.isLeader();
}

bool ShardMapController::leadingNow() const {
  return leading_ && !stopped_ && d_.leadership.isLeader();
}

// ---------------------------------------------------------------------------------------------
// Public entry points

void ShardMapController::observe(ShardMap observed) {
  post([this, observed = std::move(observed)]() mutable {
    if (!leading_) {
      // Followers mirror the informer: they answer NotLeader with status.manager.
      adopt(std::move(observed));
      return;
    }
    // The leader is the only writer of the status, and its own writes come back through the
    // informer possibly after later ones: only a spec change (new generation) matters here, and
    // it is read fresh from the store before the next operation.
    if (observed.metadata.generation != current_.metadata.generation) {
      stale_ = true;
      requestRound({});
    }
  });
}

void ShardMapController::startLeading() {
  post([this] {
    if (stopped_ || leading_) return;
    leading_ = true;
    tookOver_ = false;
    termStart_ = d_.scheduler.clock().now();
    enqueue(
        Op{"takeover", [this](std::function<void()> done) { takeover(std::move(done)); }, nullptr},
        /*front=*/true);
  });
}

void ShardMapController::stopLeading() {
  post([this] {
    if (!leading_) return;
    leading_ = false;
    tookOver_ = false;
    // A release this term obtained may be undone by another leader's assigns: it counts no more.
    released_.clear();
    d_.scheduler.cancel(periodicTimer_);
    d_.scheduler.cancel(retryTimer_);
    periodicTimer_ = retryTimer_ = 0;
    requested_.reset();
    openBatch_.reset();
    std::deque<Op> queued;
    queued.swap(ops_);
    for (Op& op : queued) {
      if (op.reply) op.reply(notLeaderResponse(""));
    }
    log_.info("leadership lost; stopping");
  });
}

void ShardMapController::shutdown() {
  post([this] {
    stopped_ = true;
    d_.scheduler.cancel(periodicTimer_);
    d_.scheduler.cancel(retryTimer_);
    periodicTimer_ = retryTimer_ = 0;
    openBatch_.reset();
    std::deque<Op> queued;
    queued.swap(ops_);
    for (Op& op : queued) {
      if (op.reply) {
        op.reply(http::Response::error(404, protocol::errors::kUnknownShardMap,
                                       "ShardMap " + key_ + " was deleted"));
      }
    }
  });
}

void ShardMapController::podChanged(const std::string& podName) {
  post([this, podName] {
    ++podsGeneration_;  // what starting() remembers may have changed
    if (!acting()) return;
    const auto idx = indexOf(podName);
    if (!idx) return;
    const auto& pod = current_.status.pods[static_cast<std::size_t>(*idx)];
    const PodHealth health = assessPod(d_.directory.cached(ref_.ns, podName), pod.uid);
    runtime_[podName].terminating = health == PodHealth::kTerminating;
    // Death from the informer is confirmed with a fresh GET before the shards are taken.
    if (health == PodHealth::kDead) queueRemoval(podName, "the pod informer saw it die");
  });
}

std::optional<ShardMapController::Refusal> ShardMapController::registerRefusal(
    const std::optional<PodInfo>& pod, const protocol::RegisterRequest& request) const {
  const std::string who = ref_.ns + "/" + request.pod;
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
  if (label == info.labels.end() || label->second != ref_.name) {
    return Refusal{403, protocol::errors::kForbidden,
                   "pod " + who + " is not labelled " + kShardMapLabel + "=" + ref_.name};
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

void ShardMapController::registerPod(protocol::RegisterRequest request, Reply caller) {
  leaderCall(std::move(caller), [this, request = std::move(request)](Reply reply) {
    auto admit = [this, request, reply] { admitRegister(request, reply); };
    // The API decides whether the caller is who it says it is: an alive pod of that name and
    // uid, labelled for this map, at its own IP. Shardcake trusted a register from a pod it had
    // declared dead and lost data when that pod kept its shards.
    //
    // When the informer's cache already shows exactly that, it is the API's answer: a pod that
    // died since is reported by the informer and removed like any other dead pod, as it would
    // be had it died just after a fresh GET. Anything else (not cached yet, another uid, a
    // refusal) is decided by a fresh GET, so a lagging cache never refuses a new pod. Saving the
    // GET matters when many pods start at once: each costs a request of the client's QPS budget.
    if (!registerRefusal(d_.directory.cached(ref_.ns, request.pod), request)) {
      admit();
      return;
    }
    d_.directory.fetch(
        ref_.ns, request.pod,
        onStrand<StatusOr<std::optional<PodInfo>>>(
            [this, request, reply, admit](StatusOr<std::optional<PodInfo>> pod) mutable {
              if (!leadingNow()) {
                reply(notLeaderResponse(""));
                return;
              }
              if (!pod.ok()) {
                reply(unavailable("cannot check pod " + request.pod +
                                  " with the Kubernetes API: " + pod.status().message()));
                return;
              }
              if (auto refusal = registerRefusal(*pod, request)) {
                log_.warn(
                    "register refused",
                    {{"pod", request.pod}, {"uid", request.uid}, {"reason", refusal->message}});
                event(EventType::kWarning, "RegisterRefused", refusal->message);
                reply(http::Response::error(refusal->status, refusal->code, refusal->message));
                return;
              }
              admit();
            }));
  });
}

void ShardMapController::leaderCall(Reply reply, std::function<void(Reply)> body) {
  post([this, reply = std::move(reply), body = std::move(body)] {
    if (!leadingNow()) {
      reply(notLeaderResponse(""));
      return;
    }
    body(reply);
  });
}

void ShardMapController::unregisterPod(protocol::UnregisterRequest request, Reply reply) {
  leaderCall(std::move(reply), [this, request = std::move(request)](Reply r) {
    // Decided here, outside the operation queue: a held pod must not keep the registrations
    // it waits for from being written.
    auto proceed = [this, request, r](const std::optional<PodInfo>& observed) {
      if (auto answer = deferral(request, observed)) {
        r(std::move(*answer));
        return;
      }
      // The answer tells the sidecar whether a termination follows its drain.
      const bool terminating = observed && observed->uid == request.uid && observed->terminating;
      Reply answer = [r, terminating](http::Response response) {
        if (response.status == 200) {
          auto e = protocol::decodeEpochResponse(response.body);
          if (e.ok()) response = epochResponse(static_cast<std::int64_t>(e->epoch), terminating);
        }
        r(std::move(response));
      };
      enqueue(Op{"unregister",
                 [this, request, answer](std::function<void()> done) {
                   doUnregister(request, answer, 1, std::move(done));
                 },
                 answer});
    };
    // The hold needs the pod's deletion deadline, and the sidecar whether its pod is being
    // deleted. The informer has it, unless the unregister arrived before the informer heard of
    // the delete: then the API is asked.
    std::optional<PodInfo> cached = d_.directory.cached(ref_.ns, request.pod);
    if (!acting() || !indexOf(request.pod).has_value() || (cached && cached->terminating)) {
      proceed(cached);
      return;
    }
    d_.directory.fetch(ref_.ns, request.pod,
                       onStrand<StatusOr<std::optional<PodInfo>>>(
                           [this, r, proceed, cached](StatusOr<std::optional<PodInfo>> pod) {
                             if (!leadingNow()) {
                               r(notLeaderResponse(""));
                               return;
                             }
                             // Without the API's answer, the cache is the best knowledge.
                             proceed(pod.ok() ? *pod : cached);
                           }));
  });
}

std::optional<http::Response> ShardMapController::deferral(
    const protocol::UnregisterRequest& request, const std::optional<PodInfo>& observed) {
  const auto idx = indexOf(request.pod);
  if (!acting() || !idx) return std::nullopt;
  const sharding::RegisteredPod& pod = current_.status.pods[static_cast<std::size_t>(*idx)];
  if (pod.uid != request.uid) return std::nullopt;
  const WallTime now = d_.scheduler.clock().wallNow();
  const auto hold = unregisterHold(current_, pod, observed, starting(), d_.maxUnregisterHold, now);
  if (!hold) {
    if (auto it = held_.find(pod.name); it != held_.end()) {
      log_.info("unregister no longer held",
                {{"pod", pod.name},
                 {"held_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                 d_.scheduler.clock().now() - it->second)
                                 .count()}});
      held_.erase(it);
    }
    return std::nullopt;
  }
  const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(hold->until - now);
  if (held_.emplace(pod.name, d_.scheduler.clock().now()).second) {
    log_.info(hold->startingPods == 0
                  ? "unregister held until pods created with its delete would be seen"
                  : "unregister held while newer pods start",
              {{"pod", pod.name},
               {"version", hold->version},
               {"starting_pods", hold->startingPods},
               {"at_most_ms", remaining.count()}});
  }
  protocol::UnregisterDeferred body;
  body.message =
      hold->startingPods == 0
          ? "pod " + pod.name + " keeps its shards for " +
                std::to_string(remaining.count() / 1000) +
                " s more, until pods created with its delete would be seen; keep serving and "
                "ask again"
          : "pod " + pod.name + " keeps its shards until the " +
                std::to_string(hold->startingPods) + " starting pod(s) of version " +
                (hold->version.empty() ? std::string("\"\"") : hold->version) +
                " have registered, for at most " + std::to_string(remaining.count() / 1000) +
                " s more; keep serving and ask again";
  body.retryAfterMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(kHoldRetryAfter).count();
  body.deferredForMs = remaining.count();
  body.version = hold->version;
  body.startingPods = hold->startingPods;
  http::Response answer = http::Response::json(409, protocol::encode(body));
  answer.headers.set(
      "Retry-After",
      std::to_string(std::chrono::ceil<std::chrono::seconds>(kHoldRetryAfter).count()));
  return answer;
}

const std::vector<std::string>& ShardMapController::starting() {
  if (!startingMemo_ || startingMemo_->podsGeneration != podsGeneration_ ||
      startingMemo_->resourceVersion != current_.metadata.resourceVersion) {
    startingMemo_ =
        StartingMemo{podsGeneration_, current_.metadata.resourceVersion,
                     startingVersions(current_, d_.directory.podsOf(ref_.ns, ref_.name))};
    // Forget holds of pods that are gone from the map (removed as dead while held).
    std::erase_if(held_, [this](const auto& entry) { return !indexOf(entry.first); });
  }
  return startingMemo_->versions;
}

void ShardMapController::notifyUnhealthy(protocol::NotifyUnhealthyRequest request, Reply reply) {
  leaderCall(std::move(reply), [this, request = std::move(request)](Reply accepted) {
    accepted(http::Response::json(202, R"({"accepted":true})"));
    const auto idx = indexOf(request.pod);
    if (!idx || !checksInFlight_.insert(request.pod).second) return;
    const std::string name = request.pod;
    const std::string address = current_.status.pods[static_cast<std::size_t>(*idx)].address;
    log_.info("pod reported unhealthy", {{"pod", name}});
    // Shardcake's rule: ask the health API; only a dead pod loses its shards. An alive pod that
    // does not answer just gets no new shards until it answers a ping again.
    checkPods({name}, [this, name, address](std::map<std::string, PodHealth> health) {
      if (health[name] == PodHealth::kDead) {
        checksInFlight_.erase(name);
        queueRemoval(name, "reported unhealthy and the API shows it dead");
        return;
      }
      const auto registered = indexOf(name);
      if (!registered) {
        checksInFlight_.erase(name);
        return;
      }
      d_.pods.ping(
          address, key_, targetOf(current_.status.pods[static_cast<std::size_t>(*registered)]),
          current_.spec.pingTimeout,
          onStrand<StatusOr<protocol::PingResponse>>(
              [this, name](StatusOr<protocol::PingResponse> r) {
                checksInFlight_.erase(name);
                if (!indexOf(name)) return;
                runtime_[name].reachable = r.ok() && r->pod == name;
                if (!runtime_[name].reachable) {
                  log_.warn("pod alive but unreachable; it gets no new shards", {{"pod", name}});
                }
              }));
    });
  });
}

void ShardMapController::reportRefusedCaller(std::string reason, std::string message) {
  post([this, reason = std::move(reason), message = std::move(message)]() mutable {
    event(EventType::kWarning, std::move(reason), std::move(message));
  });
}

void ShardMapController::assignments(Reply reply) {
  post([this, reply = std::move(reply)] {
    reply(http::Response::json(200, sharding::toJson(current_).dump()));
  });
}

std::optional<sharding::ManagerRef> ShardMapController::storedManager() const {
  std::lock_guard lock(mu_);
  return storedManager_;
}

// ---------------------------------------------------------------------------------------------
// Operations

void ShardMapController::enqueue(Op op, bool front) {
  if (front) {
    ops_.push_front(std::move(op));
  } else {
    ops_.push_back(std::move(op));
  }
  pump();
}

void ShardMapController::pump() {
  if (opRunning_ || stopped_) return;
  // Shards without an owner cannot serve: a round that assigns them goes before registrations
  // still waiting (each would only add one more receiver). Otherwise a thousand pods starting at
  // once kept every shard unassigned until the last of them had registered.
  const bool urgent = requested_ && requested_->immediate && acting() && !ops_.empty() &&
                      ops_.front().name == "register";
  if (ops_.empty() || urgent) {
    if (!requested_ || !acting()) return;
    const RoundRequest r = *requested_;
    requested_.reset();
    ops_.push_front(Op{
        "round", [this, r](std::function<void()> done) { runRound(r, std::move(done)); }, nullptr});
  }
  Op op = std::move(ops_.front());
  ops_.pop_front();
  opRunning_ = true;
  const std::uint64_t seq = ++opSeq_;
  auto finished = std::make_shared<bool>(false);
  op.run([this, seq, finished] {
    if (*finished) return;
    *finished = true;
    // Continue on a fresh strand task: the operation may finish deep inside its own callbacks.
    post([this, seq] {
      if (opSeq_ != seq || !opRunning_) return;
      opRunning_ = false;
      pump();
    });
  });
}

void ShardMapController::requestRound(RoundRequest request) {
  if (!requested_) requested_ = RoundRequest{};
  requested_->immediate |= request.immediate;
  requested_->resendAll |= request.resendAll;
  pump();
}

void ShardMapController::ensureFresh(std::function<void(Status)> then) {
  if (!stale_) {
    then({});
    return;
  }
  d_.store.load(ref_, onStrand<StatusOr<ShardMap>>([this, then](StatusOr<ShardMap> map) {
                  if (!map.ok()) {
                    log_.warn("cannot load the ShardMap", {{"error", describe(map.status())}});
                    then(map.status());
                    return;
                  }
                  adopt(std::move(*map));
                  stale_ = false;
                  then({});
                }));
}

void ShardMapController::adopt(ShardMap map) {
  current_ = std::move(map);
  storedManager_ = current_.status.manager;
  // Runtime state of pods no longer registered is dropped; new pods start reachable (they
  // registered, or answered the previous leader).
  std::map<std::string, PodRuntime> next;
  for (const auto& p : current_.status.pods) {
    auto it = runtime_.find(p.name);
    next[p.name] = it != runtime_.end() ? it->second : PodRuntime{};
  }
  runtime_ = std::move(next);
  forgetLeases();
  d_.metrics.observeStatus(key_, current_.status);
}

void ShardMapController::persist(ShardMap next, std::function<void(Status)> then) {
  if (!leadingNow()) {
    then(cancelled("leadership lost"));
    return;
  }
  d_.store.writeStatus(next, onStrand<StatusOr<ShardMap>>([this, then](StatusOr<ShardMap> stored) {
                         if (!stored.ok()) {
                           // Whatever happened, the next operation reads the object again: after a
                           // Conflict someone else wrote, and after a timeout the write may or may
                           // not have been applied.
                           stale_ = true;
                           log_.warn("status write failed", {{"error", describe(stored.status())}});
                           then(stored.status());
                           return;
                         }
                         adopt(std::move(*stored));
                         consecutiveConflicts_ = 0;
                         then({});
                       }));
}

void ShardMapController::takeover(std::function<void()> done) {
  if (!leadingNow()) {
    done();
    return;
  }
  // A new leader reads the map fresh (a quorum read): what the previous leader persisted last is
  // the truth, whatever the informer showed.
  stale_ = true;
  ensureFresh([this, done](Status loaded) {
    if (!loaded.ok()) {
      scheduleTakeoverRetry();
      done();
      return;
    }
    std::set<std::string> suspects;
    for (const auto& p : current_.status.pods) {
      const auto cached = d_.directory.cached(ref_.ns, p.name);
      const PodHealth health = assessPod(cached, p.uid);
      runtime_[p.name] = PodRuntime{true, health == PodHealth::kTerminating, false};
      if (health == PodHealth::kDead) suspects.insert(p.name);
    }
    inspectPods(suspects, [this, done](std::map<std::string, Inspection> seen) {
      if (!leadingNow()) {
        done();
        return;
      }
      ShardMap next = current_;
      auto table = sharding::shardTableFromStatus(next.status, next.spec.shards);
      if (!table.ok()) {
        log_.error("stored status is invalid; not acting on this ShardMap",
                   {{"error", describe(table.status())}});
        event(EventType::kWarning, "InvalidStatus", table.status().message());
        scheduleTakeoverRetry();
        done();
        return;
      }
      std::vector<std::string> dropped;
      for (auto i = static_cast<PodIndex>(next.status.pods.size()) - 1; i >= 0; --i) {
        const auto pod = next.status.pods[static_cast<std::size_t>(i)];
        auto found = seen.find(pod.name);
        if (found == seen.end() || found->second.health != PodHealth::kDead) continue;
        // Dropped now only when nothing of it may run; the others wait for their ownership
        // lease in a removal after the takeover (removal() decides; acting() is still false
        // here, so it sends nothing).
        if (!table->shardsOf(i).empty() &&
            removal(pod, found->second.observed) == Removal::kLater) {
          queueRemoval(pod.name, "dead when this replica took over");
          continue;
        }
        dropped.push_back(pod.name);
        table->removePod(i);
        next.status.pods.erase(next.status.pods.begin() + i);
      }
      sharding::writeShardTable(*table, next.status);
      // Epoch rule 3: the previous leader may have sent unassigns at (its epoch + 1) that it
      // never persisted. Bumping the epoch here, in the write that claims status.manager, makes
      // every assign this leader sends at least as new as those fences.
      next.status.epoch = std::max(current_.status.epoch + 1, fenceFloor_);
      next.status.manager = d_.self;
      setConditions(next, *table, retryPending_);
      persist(std::move(next), [this, done, dropped](Status written) {
        if (!written.ok()) {
          if (written.code() == StatusCode::kConflict && ++consecutiveConflicts_ < 3) {
            enqueue(Op{"takeover", [this](std::function<void()> d) { takeover(std::move(d)); },
                       nullptr},
                    /*front=*/true);
          } else {
            scheduleTakeoverRetry();
          }
          done();
          return;
        }
        tookOver_ = true;
        log_.info("took over the ShardMap", {{"epoch", current_.status.epoch},
                                             {"pods", current_.status.pods.size()},
                                             {"dropped_dead_pods", dropped.size()}});
        event(EventType::kNormal, "LeaderTookOver",
              d_.self.pod + " leads this ShardMap at epoch " +
                  std::to_string(current_.status.epoch) +
                  (dropped.empty() ? std::string()
                                   : "; dropped " + std::to_string(dropped.size()) + " dead pods"));
        // Epoch rule 3: re-send every stored assignment at the new epoch (after the ping
        // confirms each pod is still the one registered).
        requestRound({dropped.empty() ? false : true, true});
        done();
      });
    });
  });
}

void ShardMapController::scheduleTakeoverRetry() {
  d_.scheduler.cancel(retryTimer_);
  retryTimer_ =
      d_.scheduler.runAfter(current_.spec.rebalanceRetryInterval, [weak = weak_from_this()] {
        auto self = weak.lock();
        if (!self) return;
        self->post([raw = self.get()] {
          raw->retryTimer_ = 0;
          if (!raw->leadingNow() || raw->tookOver_) return;
          raw->enqueue(Op{"takeover",
                          [raw](std::function<void()> d) { raw->takeover(std::move(d)); }, nullptr},
                       /*front=*/true);
        });
      });
}

// ---------------------------------------------------------------------------------------------
// The rebalance round

void ShardMapController::runRound(RoundRequest request, std::function<void()> done) {
  if (!acting()) {
    done();
    return;
  }
  auto round = std::make_shared<Round>();
  round->id = ++roundSeq_;
  round->request = request;
  round->started = d_.scheduler.clock().now();
  round->done = std::move(done);
  ensureFresh([this, round](Status loaded) {
    if (!loaded.ok()) {
      roundFinish(round, "failed");
      return;
    }
    if (!acting()) {
      roundFinish(round, "aborted");
      return;
    }
    auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
    if (!table.ok()) {
      log_.error("stored status is invalid; not rebalancing",
                 {{"error", describe(table.status())}});
      event(EventType::kWarning, "InvalidStatus", table.status().message());
      roundFinish(round, "failed");
      return;
    }
    round->table = std::move(*table);
    // Normally status.epoch. Higher only if an unassign of this replica carried an epoch that no
    // write has reached yet; the round then persists at least that epoch (epoch rule 3).
    round->epoch = std::max(current_.status.epoch, fenceFloor_ - 1);
    for (const auto& p : current_.status.pods) {
      const PodHealth health = assessPod(d_.directory.cached(ref_.ns, p.name), p.uid);
      runtime_[p.name].terminating = health == PodHealth::kTerminating;
      // A dead pod waiting for its removal receives nothing.
      if (awaitingRemoval(p)) runtime_[p.name].reachable = false;
      if (health == PodHealth::kDead) queueRemoval(p.name, "the pod informer shows it dead");
    }
    // 1. Decide (pure).
    auto moves = sharding::decide(
        planningInput(current_, round->table, runtimeVector(), round->request.immediate),
        d_.random);
    if (!moves.ok()) {
      log_.error("planner refused its input", {{"error", describe(moves.status())}});
      roundFinish(round, "failed");
      return;
    }
    round->moves = std::move(*moves);
    roundPing(round);
  });
}

void ShardMapController::roundPing(std::shared_ptr<Round> round) {
  const auto podCount = static_cast<std::int32_t>(current_.status.pods.size());
  round->pings.assign(static_cast<std::size_t>(podCount), PingOutcome{});
  // 2. Ping the pods involved; periodic rounds and takeover ping every pod, whose answers
  // reconcile what the pods hold with the map (epoch rule 4).
  const bool all = !round->request.immediate || round->request.resendAll;
  const std::vector<PodIndex> targets = podsToPing(round->moves, podCount, all);
  if (targets.empty()) {
    roundUnassign(round);
    return;
  }
  round->outstanding = targets.size();
  for (PodIndex p : targets) {
    const sharding::RegisteredPod pod = current_.status.pods[static_cast<std::size_t>(p)];
    auto answered = onStrand<StatusOr<protocol::PingResponse>>(
                     [this, round, p, pod](StatusOr<protocol::PingResponse> r) {
                       PingOutcome& out = round->pings[static_cast<std::size_t>(p)];
                       std::string problem;
                       if (!r.ok()) {
                         problem = "ping: " + r.status().toString();
                       } else if (r->pod != pod.name || r->uid != pod.uid ||
                                  r->incarnation != pod.incarnation) {
                         // Pod IPs are reused, and sidecars restart: whoever answers is not the
                         // process that registered.
                         problem = "ping: answered by pod " + r->pod + " (uid " + r->uid +
                                   ", incarnation " + r->incarnation + ")";
                       } else {
                         auto held = ShardSet::parse(r->shards, current_.spec.shards);
                         if (!held.ok()) {
                           problem = "ping: " + held.status().message();
                         } else {
                           out.state = PingOutcome::State::kAnswered;
                           held->forEach([&](sharding::ShardId s) { out.held.push_back(s); });
                         }
                       }
                       if (!problem.empty()) {
                         out.state = PingOutcome::State::kFailed;
                         round->failed[pod.name] = problem;
                       }
                       if (auto it = runtime_.find(pod.name); it != runtime_.end()) {
                         it->second.reachable = problem.empty();
                       }
                       if (--round->outstanding == 0) roundUnassign(round);
                     });
    // A dead pod waiting for its removal is not asked: its answer must not lead to an assign
    // (rounds re-send what the map gives a pod it does not hold).
    if (awaitingRemoval(pod)) {
      answered(failedPrecondition("dead; its shards wait for its removal"));
      continue;
    }
    d_.pods.ping(pod.address, key_, targetOf(pod), current_.spec.pingTimeout, std::move(answered));
  }
}

void ShardMapController::roundUnassign(std::shared_ptr<Round> round) {
  if (!acting()) {
    roundFinish(round, "aborted");
    return;
  }
  round->plan = planRound(round->table, round->moves, round->pings, round->request.resendAll);
  if (!round->plan.strays.empty()) {
    for (const auto& [p, shards] : round->plan.strays) {
      const auto& name = current_.status.pods[static_cast<std::size_t>(p)].name;
      log_.warn("pod holds shards the map does not give it; unassigning them",
                {{"pod", name}, {"shards", ShardSet::of(shards).toString()}});
    }
  }
  if (round->plan.unassign.empty()) {
    roundPersist(round);
    return;
  }
  // 3. Unassign. Epoch rule 2: the unassign carries the epoch the following persist writes; the
  // pod fences those shards against any older assign still in flight.
  const std::int64_t fence = round->epoch + 1;
  fenceFloor_ = std::max(fenceFloor_, fence);
  round->outstanding = round->plan.unassign.size();
  for (const auto& [p, shards] : round->plan.unassign) {
    const sharding::RegisteredPod pod = current_.status.pods[static_cast<std::size_t>(p)];
    protocol::ShardsRequest req{key_, targetOf(pod), static_cast<protocol::Epoch>(fence),
                                ShardSet::of(shards)};
    d_.pods.unassign(pod.address, req, current_.spec.handoffTimeout + current_.spec.pingTimeout,
                     onStrand<Status>([this, round, p, pod](Status s) {
                       if (!s.ok()) {
                         round->unassignFailed.insert(p);
                         round->failed[pod.name] = "unassign: " + s.toString();
                       }
                       if (--round->outstanding == 0) roundPersist(round);
                     }));
  }
}

void ShardMapController::roundPersist(std::shared_ptr<Round> round) {
  if (!acting()) {
    // Unassigns may have gone out at epoch + 1: the next leader bumps the epoch when it takes
    // over (epoch rule 3), and this replica does too if it leads again (fenceFloor_).
    roundFinish(round, "aborted");
    return;
  }
  // Epoch rule 3: if this replica ever sent an unassign at an epoch not yet persisted (this round
  // or a failed earlier one), this round persists, so its assigns carry at least that epoch.
  const bool mustPersist = fenceFloor_ > current_.status.epoch;
  round->commit =
      commitRound(round->table, round->epoch, round->plan, round->unassignFailed, mustPersist);
  const RoundCommit& commit = *round->commit;
  ShardMap next = current_;
  if (commit.persist) {
    // Epoch rule 1: a persisted change of the owners is a new epoch; the moved shards' groups
    // carry it (commitRound assigned them at commit.epoch).
    sharding::writeShardTable(commit.table, next.status);
    next.status.epoch = commit.epoch;
  }
  setConditions(next, commit.table, !round->failed.empty());
  if (next.status == current_.status) {
    roundAssign(round);
    return;
  }
  // 4. Persist before assigning (write-ahead): a leader that dies after this line leaves a map
  // its successor finishes; one that dies before it leaves the old owners, which still hold or
  // were told to release their shards, and nobody else was told to take them.
  persist(std::move(next), [this, round](Status written) {
    if (!written.ok()) {
      // Epoch rule 6: without the write nothing is assigned. Conflict: another writer moved the
      // object on; the next round starts from what it wrote.
      roundFinish(round, written.code() == StatusCode::kConflict ? "conflict" : "failed");
      return;
    }
    roundAssign(round);
  });
}

void ShardMapController::roundAssign(std::shared_ptr<Round> round) {
  // Epoch rule 7: no assign after losing the lease, even with the write done; the next leader
  // re-sends it at its own epoch.
  if (!acting()) {
    roundFinish(round, "aborted");
    return;
  }
  const RoundCommit& commit = *round->commit;
  if (commit.assign.empty()) {
    roundCheckFailed(round);
    return;
  }
  // 5. Assign, at the persisted epoch (epoch rule 3). Assign is idempotent.
  round->outstanding = commit.assign.size();
  for (const auto& [p, shards] : commit.assign) {
    const sharding::RegisteredPod pod = current_.status.pods[static_cast<std::size_t>(p)];
    protocol::ShardsRequest req{key_, targetOf(pod), static_cast<protocol::Epoch>(commit.epoch),
                                ShardSet::of(shards)};
    auto answered = onStrand<StatusOr<protocol::AssignResponse>>(
                       [this, round, pod](StatusOr<protocol::AssignResponse> r) {
                         if (!r.ok()) {
                           round->failed[pod.name] = "assign: " + r.status().toString();
                         } else if (!r->refused.empty()) {
                           // A fence newer than our epoch: some replica sent an unassign this one
                           // does not know of. The map stays as persisted; the next round
                           // reconciles.
                           round->failed[pod.name] =
                               "assign: refused as stale: " + r->refused.toString();
                           log_.error("pod refused an assign as stale",
                                      {{"pod", pod.name}, {"shards", r->refused.toString()}});
                         }
                         if (--round->outstanding == 0) roundCheckFailed(round);
                       });
    // A pod found dead since the round began gets nothing: its sidecar may have released its
    // shards, and the removal that follows relies on it holding none.
    if (awaitingRemoval(pod)) {
      answered(failedPrecondition("dead; not assigned"));
      continue;
    }
    d_.pods.assign(pod.address, req, current_.spec.shards, current_.spec.pingTimeout,
                   std::move(answered));
  }
}

void ShardMapController::roundCheckFailed(std::shared_ptr<Round> round) {
  if (round->failed.empty()) {
    roundFinish(round, round->commit && !round->commit->applied.empty() ? "moved" : "idle");
    return;
  }
  // 6. Pods that failed a step: ask the API. Dead ones are removed (and a round follows at
  // once); alive ones keep their shards and get no new ones until they answer a ping.
  std::set<std::string> names;
  for (const auto& [name, why] : round->failed) names.insert(name);
  checkPods(names, [this, round](std::map<std::string, PodHealth> health) {
    for (const auto& [name, h] : health) {
      if (h == PodHealth::kDead) {
        queueRemoval(name, "failed a rebalance step and the API shows it dead");
      } else if (auto it = runtime_.find(name); it != runtime_.end()) {
        it->second.reachable = false;
      }
    }
    roundFinish(round, "partial");
  });
}

void ShardMapController::roundFinish(std::shared_ptr<Round> round, std::string_view result) {
  const double seconds = secondsSince(d_.scheduler.clock(), round->started);
  const std::int64_t moved =
      round->commit && result != "conflict" && result != "failed" && result != "aborted"
          ? static_cast<std::int64_t>(round->commit->applied.size())
          : 0;
  d_.metrics.roundFinished(key_, result, seconds, moved);
  log_.info("rebalance round finished",
            {{"round", round->id},
             {"result", std::string(result)},
             {"moves", moved},
             {"epoch", current_.status.epoch},
             {"failed_pods", round->failed.size()},
             {"duration_ms", static_cast<std::int64_t>(seconds * 1e3)}});
  if (moved > 0) {
    event(EventType::kNormal, "Rebalanced",
          "moved " + std::to_string(moved) + " shards in " +
              std::to_string(static_cast<std::int64_t>(seconds * 1e3)) + " ms (epoch " +
              std::to_string(current_.status.epoch) + ")");
  }
  if (result == "aborted") {
    round->done();
    return;
  }
  const bool failed = result == "partial" || result == "failed" || result == "conflict";
  if (result == "partial") {
    event(EventType::kWarning, "RebalanceIncomplete",
          joinNames(round->failed) + "; retrying in " +
              sharding::formatDuration(current_.spec.rebalanceRetryInterval));
  }
  retryPending_ = failed;
  if (!acting()) {
    round->done();
    return;
  }
  if (result == "conflict") {
    // Another writer moved the object on: reload and go again at once, then back off.
    scheduleRetry(++consecutiveConflicts_ <= 1 ? Duration{0}
                                               : current_.spec.rebalanceRetryInterval);
  } else if (failed) {
    scheduleRetry(current_.spec.rebalanceRetryInterval);
  }
  schedulePeriodic();
  // 7. Conditions: the persist above wrote them as of the unassign step; assign failures are
  // known only now. Written only when they changed.
  if (stale_) {
    round->done();
    return;
  }
  auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
  ShardMap next = current_;
  if (table.ok()) setConditions(next, *table, retryPending_);
  if (next.status == current_.status) {
    round->done();
    return;
  }
  persist(std::move(next), [round](Status) { round->done(); });
}

// ---------------------------------------------------------------------------------------------
// Register, unregister, dead pods

void ShardMapController::admitRegister(protocol::RegisterRequest request, Reply reply) {
  // Registrations that wait together are recorded together, in one status write: a thousand
  // pods starting at once cost a few writes of the large status instead of a thousand.
  auto& batch = openBatch_;
  const bool fits = batch && batch->items.size() < kMaxRegisterBatch &&
                    std::none_of(batch->items.begin(), batch->items.end(),
                                 [&](const auto& item) { return item.first.pod == request.pod; });
  if (fits) {
    batch->items.emplace_back(std::move(request), std::move(reply));
    return;
  }
  batch = std::make_shared<RegisterBatch>();
  batch->items.emplace_back(std::move(request), std::move(reply));
  enqueue(Op{"register",
             [this, b = batch](std::function<void()> done) {
               if (openBatch_ == b) openBatch_.reset();  // later callers start the next batch
               doRegister(b, 1, std::move(done));
             },
             [b = batch](http::Response r) {
               for (auto& item : b->items) item.second(r);
             }});
}

void ShardMapController::doRegister(std::shared_ptr<RegisterBatch> batch, int attempt,
                                    std::function<void()> done) {
  auto answerAll = [batch](const http::Response& r) {
    for (auto& item : batch->items) item.second(r);
  };
  if (!acting()) {
    answerAll(tookOver_ || !leadingNow() ? notLeaderResponse("")
                                         : unavailable("the leader is taking over; retry"));
    done();
    return;
  }
  ensureFresh([this, batch, attempt, done, answerAll](Status loaded) {
    if (!loaded.ok()) {
      answerAll(unavailable("cannot load ShardMap " + key_ + ": " + loaded.message()));
      done();
      return;
    }
    auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
    if (!table.ok()) {
      answerAll(http::Response::error(500, "Internal", "stored status is invalid"));
      done();
      return;
    }
    ShardMap next = current_;
    struct Outcome {
      bool sameUid = false;
      bool deferred = false;  // answered 503: the pod it replaces may still run
      std::string replaced;   // uid of the pod this registration replaces
    };
    auto outcomes = std::make_shared<std::vector<Outcome>>();
    for (const auto& [request, reply] : batch->items) {
      auto& pods = next.status.pods;
      auto it = std::find_if(pods.begin(), pods.end(),
                             [&](const auto& p) { return p.name == request.pod; });
      Outcome outcome;
      if (it != pods.end() && it->uid == request.uid) {
        // The same pod again: its sidecar restarted (a new incarnation, which reset the app, so
        // nothing of the old one runs) or lost its registration. It keeps its shards, and
        // assign is re-sent to this incarnation.
        outcome.sameUid = true;
        it->address = request.address;
        it->version = request.version;
        it->incarnation = request.incarnation;
      } else if (it != pods.end() &&
                 !table->shardsOf(static_cast<sharding::PodIndex>(it - pods.begin())).empty() &&
                 removal(*it, std::nullopt) == Removal::kLater) {
        // A new pod of the same name while the registered one may still run somewhere (it was
        // removed without the kubelet confirming its end): its shards wait for its lease, and
        // so does this registration.
        outcome.deferred = true;
        queueRemoval(it->name, "replaced by a new pod of the same name");
      } else {
        if (it != pods.end()) {
          // A new pod of the same name, and nothing of the registered one runs: its shards are
          // taken without acknowledgement.
          const auto idx = static_cast<sharding::PodIndex>(it - pods.begin());
          outcome.replaced = it->uid;
          const bool hadShards = !table->shardsOf(idx).empty();
          table->removePod(idx);
          pods.erase(it);
          // Epoch rule 1: the owners change.
          if (hadShards) next.status.epoch = std::max(current_.status.epoch + 1, fenceFloor_);
        }
        pods.push_back(sharding::RegisteredPod{request.pod, request.uid, request.address,
                                               request.version, 0, request.incarnation});
      }
      outcomes->push_back(std::move(outcome));
    }
    sharding::writeShardTable(*table, next.status);
    setConditions(next, *table, retryPending_);
    auto finish = [this, batch, outcomes, done]() {
      std::vector<std::string> resend;
      for (std::size_t i = 0; i < batch->items.size(); ++i) {
        const auto& [request, reply] = batch->items[i];
        const Outcome& outcome = (*outcomes)[i];
        if (outcome.deferred) {
          reply(unavailable("a pod named " + request.pod +
                            " with another uid is registered and may still run; its shards move "
                            "once its ownership lease has run out: retry"));
          continue;
        }
        // A new incarnation starts afresh; a restarted sidecar is reachable again. The register
        // confirms its ownership lease (the sidecar counts it from its request's start).
        runtime_[request.pod] = PodRuntime{};
        recordGrant(request.pod, request.uid);
        reply(epochResponse(current_.status.epoch));
        if (outcome.sameUid) {
          resend.push_back(request.pod);
          continue;
        }
        log_.info("pod registered", {{"pod", request.pod},
                                     {"uid", request.uid},
                                     {"address", request.address},
                                     {"version", request.version}});
        event(EventType::kNormal, "PodRegistered",
              "pod " + request.pod + " (version " +
                  (request.version.empty() ? std::string("none") : request.version) +
                  ") registered" +
                  (outcome.replaced.empty() ? std::string()
                                            : "; it replaces uid " + outcome.replaced));
      }
      // The first pod gets every shard at once; otherwise a balancing round gives it a share.
      const bool unassigned = current_.status.unassignedCount > 0;
      auto followUp = [this, unassigned, done] {
        requestRound({unassigned, false});
        done();
      };
      resendEach(std::move(resend), std::move(followUp));
    };
    if (next.status == current_.status) {
      finish();
      return;
    }
    persist(std::move(next), [this, batch, attempt, done, finish, answerAll](Status written) {
      if (written.ok()) {
        finish();
        return;
      }
      if (written.code() == StatusCode::kConflict && attempt < kMaxWriteAttempts) {
        enqueue(Op{"register",
                   [this, batch, attempt](std::function<void()> d) {
                     doRegister(batch, attempt + 1, std::move(d));
                   },
                   answerAll},
                /*front=*/true);
      } else {
        answerAll(unavailable("could not record the registration: " + written.message()));
      }
      done();
    });
  });
}

void ShardMapController::resendEach(std::vector<std::string> pods, std::function<void()> then) {
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

void ShardMapController::resendAssign(const std::string& podName, std::function<void()> done) {
  const auto idx = indexOf(podName);
  auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
  if (!idx || !table.ok() || !acting()) {
    done();
    return;
  }
  const ShardSet shards = table->shardsOf(*idx);
  if (shards.empty()) {
    done();
    return;
  }
  if (fenceFloor_ > current_.status.epoch) {
    // Epoch rule 3: an unassign went out at an epoch not yet persisted; an assign at the current
    // epoch could be refused. The round persists first, then assigns.
    requestRound({});
    done();
    return;
  }
  const auto& pod = current_.status.pods[static_cast<std::size_t>(*idx)];
  if (awaitingRemoval(pod)) {
    done();
    return;
  }
  // Epoch rule 3: re-sends carry the current persisted epoch.
  protocol::ShardsRequest req{key_, targetOf(pod), static_cast<protocol::Epoch>(current_.status.epoch),
                              shards};
  d_.pods.assign(pod.address, req, current_.spec.shards, current_.spec.pingTimeout,
                 onStrand<StatusOr<protocol::AssignResponse>>(
                     [this, podName, done](StatusOr<protocol::AssignResponse> r) {
                       if (!r.ok() || !r->refused.empty()) {
                         log_.warn("re-sent assign failed",
                                   {{"pod", podName},
                                    {"error", r.ok() ? "refused " + r->refused.toString()
                                                     : r.status().toString()}});
                         if (auto it = runtime_.find(podName); it != runtime_.end()) {
                           it->second.reachable = false;
                         }
                         scheduleRetry(current_.spec.rebalanceRetryInterval);
                       }
                       done();
                     }));
}

void ShardMapController::doUnregister(protocol::UnregisterRequest request, Reply reply, int attempt,
                                      std::function<void()> done) {
  if (!acting()) {
    reply(tookOver_ || !leadingNow() ? notLeaderResponse("")
                                     : unavailable("the leader is taking over; retry"));
    done();
    return;
  }
  ensureFresh([this, request, reply, attempt, done](Status loaded) {
    if (!loaded.ok()) {
      reply(unavailable("cannot load ShardMap " + key_ + ": " + loaded.message()));
      done();
      return;
    }
    const auto idx = indexOf(request.pod);
    if (!idx) {
      // Already out (a retried unregister, or removed as dead): nothing to do.
      reply(epochResponse(current_.status.epoch));
      done();
      return;
    }
    const sharding::RegisteredPod pod = current_.status.pods[static_cast<std::size_t>(*idx)];
    if (pod.uid != request.uid) {
      reply(http::Response::error(404, protocol::errors::kPodNotAlive,
                                  "pod " + request.pod + " with uid " + request.uid +
                                      " is not registered; the registered pod of that name has "
                                      "uid " +
                                      pod.uid));
      done();
      return;
    }
    runtime_[pod.name].leaving = true;
    auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
    if (!table.ok()) {
      reply(http::Response::error(500, "Internal", "stored status is invalid"));
      done();
      return;
    }
    const ShardSet shards = table->shardsOf(*idx);
    // Removes the pod from the map and persists; answers the caller.
    auto removeAndPersist = [this, request, reply, attempt, done, pod]() {
      auto t = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
      const auto i = indexOf(pod.name);
      if (!t.ok() || !i) {
        reply(epochResponse(current_.status.epoch));
        done();
        return;
      }
      ShardMap next = current_;
      const bool hadShards = !t->shardsOf(*i).empty();
      t->removePod(*i);
      next.status.pods.erase(next.status.pods.begin() + *i);
      sharding::writeShardTable(*t, next.status);
      // Epoch rules 1 and 5: the pod's shards become unassigned at the epoch its unassign
      // carried.
      if (hadShards || fenceFloor_ > current_.status.epoch) {
        next.status.epoch = std::max(current_.status.epoch + 1, fenceFloor_);
      }
      setConditions(next, *t, retryPending_);
      persist(std::move(next), [this, request, reply, attempt, done, pod](Status written) {
        if (!written.ok()) {
          if (written.code() == StatusCode::kConflict && attempt < kMaxWriteAttempts) {
            enqueue(Op{"unregister",
                       [this, request, reply, attempt](std::function<void()> d) {
                         doUnregister(request, reply, attempt + 1, std::move(d));
                       },
                       reply},
                    /*front=*/true);
          } else {
            reply(unavailable("could not record the unregistration: " + written.message()));
          }
          done();
          return;
        }
        reply(epochResponse(current_.status.epoch));
        d_.pods.forget(pod.address);
        log_.info("pod unregistered", {{"pod", pod.name}, {"epoch", current_.status.epoch}});
        event(EventType::kNormal, "PodUnregistered",
              "pod " + pod.name + " unregistered; its shards are reassigned");
        // The immediate round places the pod's shards on the others.
        requestRound({true, false});
        done();
      });
    };
    if (shards.empty()) {
      removeAndPersist();
      return;
    }
    // Epoch rule 5: unassign from the pod itself first. A draining pod answers at once; a caller
    // that unregisters without draining gets its entities stopped here before anyone else may
    // take the shards. Epoch rule 2: at the epoch the removal will persist.
    const std::int64_t fence = current_.status.epoch + 1;
    fenceFloor_ = std::max(fenceFloor_, fence);
    protocol::ShardsRequest req{key_, targetOf(pod), static_cast<protocol::Epoch>(fence), shards};
    d_.pods.unassign(
        pod.address, req, current_.spec.handoffTimeout + current_.spec.pingTimeout,
        onStrand<Status>([this, reply, done, pod, removeAndPersist](Status s) {
          if (!acting()) {
            reply(notLeaderResponse(""));
            done();
            return;
          }
          if (s.ok()) {
            removeAndPersist();
            return;
          }
          log_.warn("unassign before unregister failed",
                    {{"pod", pod.name}, {"error", s.toString()}});
          // Without the pod's acknowledgement its shards may be taken only if it is dead, and
          // surely runs nothing.
          inspectPods({pod.name}, [this, reply, done, pod, s, removeAndPersist](
                                      std::map<std::string, Inspection> seen) {
            const Inspection& i = seen[pod.name];
            if (i.health == PodHealth::kDead && removal(pod, i.observed) == Removal::kNow) {
              removeAndPersist();
              return;
            }
            if (i.health == PodHealth::kDead) queueRemoval(pod.name, "died while unregistering");
            reply(http::Response::error(
                s.code() == StatusCode::kDeadlineExceeded ? 504 : 503,
                s.code() == StatusCode::kDeadlineExceeded ? protocol::errors::kHandoffTimeout
                                                          : std::string_view("Unavailable"),
                "could not unassign the pod's shards before removing it (" + s.toString() +
                    "); it keeps them; retry the unregister"));
            // Epoch rule 3: the unassign went out at an epoch not yet persisted; the round
            // persists it before any further assign.
            requestRound({});
            done();
          });
        }));
  });
}

void ShardMapController::queueRemoval(const std::string& podName, std::string reason) {
  if (!removalsQueued_.insert(podName).second) return;
  log_.info("pod suspected dead; checking with the API", {{"pod", podName}, {"reason", reason}});
  if (removalOpQueued_) return;
  removalOpQueued_ = true;
  enqueue(Op{"remove-dead",
             [this](std::function<void()> done) {
               removalOpQueued_ = false;
               std::set<std::string> names;
               names.swap(removalsQueued_);
               removeDead(std::move(names), std::move(done));
             },
             nullptr},
          /*front=*/true);
}

void ShardMapController::removeDead(std::set<std::string> candidates, std::function<void()> done) {
  if (!acting()) {
    done();
    return;
  }
  ensureFresh([this, candidates, done](Status loaded) {
    if (!loaded.ok()) {
      scheduleRetry(current_.spec.rebalanceRetryInterval);
      done();
      return;
    }
    std::set<std::string> registered;
    for (const auto& name : candidates) {
      if (indexOf(name)) registered.insert(name);
    }
    inspectPods(registered, [this, done](std::map<std::string, Inspection> seen) {
      if (!acting()) {
        done();
        return;
      }
      auto table = sharding::shardTableFromStatus(current_.status, current_.spec.shards);
      if (!table.ok()) {
        done();
        return;
      }
      ShardMap next = current_;
      std::vector<sharding::RegisteredPod> dead;
      bool hadShards = false;
      for (auto i = static_cast<PodIndex>(next.status.pods.size()) - 1; i >= 0; --i) {
        const auto pod = next.status.pods[static_cast<std::size_t>(i)];
        auto h = seen.find(pod.name);
        if (h == seen.end() || h->second.health != PodHealth::kDead) continue;
        // Only the shards of a dead pod of which nothing runs are taken without its
        // acknowledgement: the kubelet confirmed its end, its ownership lease has run out, or
        // its sidecar released them. Otherwise it stays until one of these is true.
        if (!table->shardsOf(i).empty() && removal(pod, h->second.observed) == Removal::kLater) {
          continue;
        }
        hadShards |= !table->shardsOf(i).empty();
        table->removePod(i);
        next.status.pods.erase(next.status.pods.begin() + i);
        dead.push_back(pod);
      }
      if (dead.empty()) {
        done();
        return;
      }
      sharding::writeShardTable(*table, next.status);
      // Epoch rule 1: the owners change.
      if (hadShards || fenceFloor_ > current_.status.epoch) {
        next.status.epoch = std::max(current_.status.epoch + 1, fenceFloor_);
      }
      setConditions(next, *table, retryPending_);
      persist(std::move(next), [this, done, dead](Status written) {
        if (!written.ok()) {
          for (const auto& p : dead) queueRemoval(p.name, "retry after a failed write");
          done();
          return;
        }
        for (const auto& p : dead) {
          d_.pods.forget(p.address);
          log_.warn("pod is dead; its shards are reassigned", {{"pod", p.name}, {"uid", p.uid}});
          event(EventType::kWarning, "PodDead",
                "pod " + p.name + " (uid " + p.uid + ", " + std::to_string(p.shards) +
                    " shards) is gone; its shards are reassigned without its acknowledgement");
        }
        requestRound({true, false});
        done();
      });
    });
  });
}

void ShardMapController::checkPods(std::set<std::string> names,
                                   std::function<void(std::map<std::string, PodHealth>)> then) {
  inspectPods(std::move(names), [then](std::map<std::string, Inspection> seen) {
    std::map<std::string, PodHealth> health;
    for (const auto& [name, i] : seen) health[name] = i.health;
    then(std::move(health));
  });
}

void ShardMapController::inspectPods(
    std::set<std::string> names, std::function<void(std::map<std::string, Inspection>)> then) {
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
    const auto idx = indexOf(name);
    const std::string uid =
        idx ? current_.status.pods[static_cast<std::size_t>(*idx)].uid : std::string();
    d_.directory.fetch(ref_.ns, name,
                       onStrand<StatusOr<std::optional<PodInfo>>>(
                           [this, check, name, uid, then](StatusOr<std::optional<PodInfo>> pod) {
                             // An API error proves nothing: the pod counts as alive and keeps its
                             // shards.
                             Inspection& i = check->seen[name];
                             i.health = pod.ok() ? assessPod(*pod, uid) : PodHealth::kAlive;
                             if (pod.ok() && pod->has_value() && (*pod)->uid == uid) {
                               i.observed = **pod;
                             }
                             if (!pod.ok()) {
                               log_.warn("cannot check pod with the API",
                                         {{"pod", name}, {"error", pod.status().toString()}});
                             }
                             if (--check->outstanding == 0) then(check->seen);
                           }));
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

std::optional<PodIndex> ShardMapController::indexOf(const std::string& podName) const {
  const auto& pods = current_.status.pods;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].name == podName) return static_cast<PodIndex>(i);
  }
  return std::nullopt;
}

std::vector<PodRuntime> ShardMapController::runtimeVector() const {
  std::vector<PodRuntime> out;
  for (const auto& p : current_.status.pods) {
    auto it = runtime_.find(p.name);
    out.push_back(it != runtime_.end() ? it->second : PodRuntime{});
  }
  return out;
}

bool ShardMapController::movesPending(const ShardMap& map, const ShardTable& table) const {
  // A dry run of the next periodic round, with its own Random so that the rounds' sequence does
  // not depend on how often conditions are computed. Whether any move happens does not depend
  // on which shards are sampled.
  SeededRandom dryRun(1);
  std::vector<PodRuntime> runtime;
  for (const auto& p : map.status.pods) {
    auto it = runtime_.find(p.name);
    runtime.push_back(it != runtime_.end() ? it->second : PodRuntime{});
  }
  auto moves = sharding::decide(planningInput(map, table, runtime, false), dryRun);
  return moves.ok() && !moves->empty();
}

void ShardMapController::setConditions(ShardMap& map, const ShardTable& table,
                                       bool retryPending) const {
  ConditionFacts facts;
  facts.generation = map.metadata.generation;
  facts.retryPending = retryPending;
  facts.movesPending = movesPending(map, table);
  facts.now = kube::formatTime(d_.scheduler.clock().wallNow());
  updateConditions(map.status, facts);
}

void ShardMapController::schedulePeriodic() {
  d_.scheduler.cancel(periodicTimer_);
  periodicTimer_ =
      d_.scheduler.runAfter(current_.spec.rebalanceInterval, [weak = weak_from_this()] {
        auto self = weak.lock();
        if (!self) return;
        self->post([raw = self.get()] {
          raw->periodicTimer_ = 0;
          raw->requestRound({});
        });
      });
}

void ShardMapController::scheduleRetry(Duration delay) {
  if (retryTimer_ != 0) return;
  retryTimer_ = d_.scheduler.runAfter(delay, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->post([raw = self.get()] {
      raw->retryTimer_ = 0;
      raw->requestRound({});
    });
  });
}

void ShardMapController::event(EventType type, std::string reason, std::string message) {
  d_.events.record(current_.metadata, type, std::move(reason), std::move(message));
}

}  // namespace kshard::manager
