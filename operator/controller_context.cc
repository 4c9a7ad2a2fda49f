#include "operator/controller_context.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "kube/api_time.h"
#include "operator/shard_map_conditions.h"

namespace kshard::manager {

using sharding::PodIndex;
using sharding::ShardMap;
using sharding::ShardTable;

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

http::Response epochResponse(std::int64_t epoch, std::optional<bool> terminating) {
  return http::Response::json(200, protocol::encode(protocol::EpochResponse{
                                       static_cast<protocol::Epoch>(epoch), terminating}));
}

http::Response unavailableResponse(std::string_view message) {
  return http::Response::error(503, "Unavailable", message);
}

// ---------------------------------------------------------------------------------------------
// Strand

void Strand::post(std::function<void()> task) {
  scheduler_.runAfter(Duration{0}, [this, owner = owner_, task = std::move(task)] {
    auto self = owner.lock();
    if (!self) return;
    std::lock_guard lock(mu_);
    task();
  });
}

Scheduler::TaskId Strand::after(Duration delay, std::function<void()> task) {
  return scheduler_.runAfter(delay, [this, owner = owner_, task = std::move(task)] {
    // Held across post(), as in wrap().
    const auto self = owner.lock();
    if (!self) return;
    post(task);
  });
}

// ---------------------------------------------------------------------------------------------
// Lease facts

std::string leaseKey(const std::string& pod, const std::string& uid) { return pod + "/" + uid; }

void LeaseFacts::forgetAllBut(const std::vector<sharding::RegisteredPod>& pods) {
  std::set<std::string> registered;
  for (const auto& p : pods) registered.insert(leaseKey(p.name, p.uid));
  const auto gone = [&](const std::string& key) { return registered.count(key) == 0; };
  std::erase_if(grants, [&](const auto& e) { return gone(e.first); });
  std::erase_if(deathSeen, [&](const auto& e) { return gone(e.first); });
  std::erase_if(staleTermination, gone);
  std::erase_if(released, gone);
}

// ---------------------------------------------------------------------------------------------
// The shared state

ControllerContext::ControllerContext(ControllerDeps deps, ShardMap observed)
    : d(std::move(deps)),
      ref{observed.metadata.namespace_, observed.metadata.name},
      key(ref.toString()),
      log(d.logger.withFields({{"shard_map", ref.toString()}})),
      current(std::move(observed)) {
  storedManager = current.status.manager;
}

bool ControllerContext::acting() const {
  // Epoch rule 7: the lease is checked at every step, not only when leadership events arrive:
  // a replica whose renewals fail stops acting at its renew deadline, before another replica
  // can acquire the lease.
  return leading && tookOver && !stopped && d.leadership.isLeader();
}

bool ControllerContext::leadingNow() const {
  return leading && !stopped && d.leadership.isLeader();
}

std::optional<PodIndex> ControllerContext::indexOf(const std::string& podName) const {
  const auto& pods = current.status.pods;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].name == podName) return static_cast<PodIndex>(i);
  }
  return std::nullopt;
}

StatusOr<ShardTable> ControllerContext::table() const {
  return sharding::shardTableFromStatus(current.status, current.spec.shards);
}

std::vector<PodRuntime> ControllerContext::runtimeVector() const {
  std::vector<PodRuntime> out;
  for (const auto& p : current.status.pods) {
    auto it = runtime.find(p.name);
    out.push_back(it != runtime.end() ? it->second : PodRuntime{});
  }
  return out;
}

bool ControllerContext::movesPending(const ShardMap& map, const ShardTable& table) const {
  // A dry run of the next periodic round, with its own Random so that the rounds' sequence does
  // not depend on how often conditions are computed. Whether any move happens does not depend
  // on which shards are sampled.
  SeededRandom dryRun(1);
  std::vector<PodRuntime> pods;
  for (const auto& p : map.status.pods) {
    auto it = runtime.find(p.name);
    pods.push_back(it != runtime.end() ? it->second : PodRuntime{});
  }
  auto moves = decideMoves(map, table, pods, false, dryRun);
  return moves.ok() && !moves->empty();
}

StatusOr<std::vector<sharding::Move>> ControllerContext::decideMoves(
    const ShardMap& map, const ShardTable& table, const std::vector<PodRuntime>& pods,
    bool immediate, Random& random) const {
  const SteadyTime now = d.scheduler.clock().now();
  const auto input = [&](bool placeOnly) {
    sharding::PlanningInput in = planningInput(map, table, pods, placeOnly);
    // A shard whose handoffs keep failing stays where it is for its backoff; a placement round
    // places only shards without an owner, which nothing withholds.
    if (!placeOnly) in.withheld = throttle.withheld(table.shardCount(), now, map.spec);
    return in;
  };
  if (!immediate && map.spec.balance == sharding::Balance::kLoad) {
    if (balancesByLoad(map, table, loads)) {
      return sharding::decideByLoad(loadPlanningInput(input(false), loads, map.spec.loadTolerance,
                                                      now, map.spec.rebalanceInterval));
    }
    // Pods that will never report (older sidecars): counts, as before the map asked for load.
    // Pods not heard from yet (a new term): wait for them, placing unassigned shards only.
    const bool silent = loadKnowledge(map.status.pods, loads) == LoadKnowledge::kSilentPods;
    return sharding::decide(input(!silent), random);
  }
  return sharding::decide(input(immediate), random);
}

void ControllerContext::setConditions(ShardMap& map, const ShardTable& table, bool retry) const {
  ConditionFacts facts;
  facts.generation = map.metadata.generation;
  facts.retryPending = retry;
  facts.movesPending = movesPending(map, table);
  if (map.spec.balance == sharding::Balance::kLoad) facts.loadTolerance = map.spec.loadTolerance;
  facts.now = kube::formatTime(d.scheduler.clock().wallNow());
  updateConditions(map.status, facts);
}

void ControllerContext::event(EventType type, std::string reason, std::string message) {
  d.events.record(current.metadata, type, std::move(reason), std::move(message));
}

void ControllerContext::ensureFresh(std::function<void(Status)> then) {
  if (!stale) {
    then({});
    return;
  }
  d.store.load(ref, strand.wrap<StatusOr<ShardMap>>([this, then](StatusOr<ShardMap> map) {
    if (!map.ok()) {
      log.warn("cannot load the ShardMap", {{"error", map.status().toString()}});
      then(map.status());
      return;
    }
    adopt(std::move(*map));
    stale = false;
    then({});
  }));
}

void ControllerContext::adopt(ShardMap map) {
  current = std::move(map);
  if (leading) {
    history.record(current);
    answerWaitingReads();
  }
  storedManager = current.status.manager;
  // Runtime state of pods no longer registered is dropped; new pods start reachable (they
  // registered, or answered the previous leader).
  std::map<std::string, PodRuntime> next;
  for (const auto& p : current.status.pods) {
    auto it = runtime.find(p.name);
    next[p.name] = it != runtime.end() ? it->second : PodRuntime{};
  }
  runtime = std::move(next);
  leases.forgetAllBut(current.status.pods);
  d.metrics.observeStatus(key, current.status);
}

namespace {
// How long a read waits for the version its watch announced, and how many may wait (beyond it,
// reads are answered at once, and their sidecars read the API server).
constexpr Duration kReadWait = std::chrono::seconds(2);
constexpr std::size_t kMaxWaitingReads = 20000;
}  // namespace

void ControllerContext::answerChanges(std::string since, std::string want, Reply reply) {
  if (!leading) {
    reply(notLeaderResponse(""));
    return;
  }
  if (history.empty()) history.record(current);
  if (!want.empty() && !history.knows(want) && waitingReads.size() < kMaxWaitingReads) {
    waitingReads.push_back({std::move(since), std::move(want), std::move(reply),
                            d.scheduler.clock().now() + kReadWait});
    armReadTimer();
    return;
  }
  reply(http::Response::json(200, history.answer(since, want)));
}

void ControllerContext::answerWaitingReads() {
  if (waitingReads.empty()) return;
  const SteadyTime now = d.scheduler.clock().now();
  std::vector<WaitingRead> still;
  for (auto& r : waitingReads) {
    if (history.knows(r.want) || r.until <= now) {
      r.reply(http::Response::json(200, history.answer(r.since, r.want)));
    } else {
      still.push_back(std::move(r));
    }
  }
  waitingReads = std::move(still);
  armReadTimer();
}

void ControllerContext::armReadTimer() {
  if (waitingReads.empty() || readTimerArmed) return;
  readTimerArmed = true;
  strand.after(kReadWait / 4, [this] {
    readTimerArmed = false;
    answerWaitingReads();
  });
}

void ControllerContext::persist(ShardMap next, std::function<void(Status)> then) {
  if (!leadingNow()) {
    then(cancelled("leadership lost"));
    return;
  }
  d.store.writeStatus(next,
                      strand.wrap<StatusOr<ShardMap>>([this, then](StatusOr<ShardMap> stored) {
                        if (!stored.ok()) {
                          // Whatever happened, the next operation reads the object again: after a
                          // Conflict someone else wrote, and after a timeout the write may or may
                          // not have been applied.
                          stale = true;
                          log.warn("status write failed", {{"error", stored.status().toString()}});
                          then(stored.status());
                          return;
                        }
                        adopt(std::move(*stored));
                        consecutiveConflicts = 0;
                        then({});
                      }));
}

}  // namespace kshard::manager
