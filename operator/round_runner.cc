#include "operator/round_runner.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kube/api_time.h"
#include "operator/shard_loads.h"

namespace kshard::manager {
namespace {

using sharding::ShardMap;
using sharding::ShardSet;

std::string joinNames(const std::map<std::string, std::string>& failed) {
  std::string out;
  for (const auto& [name, why] : failed) {
    if (!out.empty()) out += "; ";
    out += name + ": " + why;
  }
  return out;
}

}  // namespace

struct RoundRunner::Round {
  std::uint64_t id = 0;
  RoundRequest request;
  Step step = Step::kDecide;
  SteadyTime started{};
  std::function<void()> done;
  sharding::ShardTable table{1};
  std::int64_t epoch = 0;  // status.epoch when the round started
  std::vector<Move> moves;
  std::vector<PingOutcome> pings;
  RoundPlan plan;
  std::set<PodIndex> unassignFailed;
  // Per pod whose unassign answered 504 HandoffTimeout: the shards it named still busy.
  std::map<PodIndex, std::vector<ShardId>> busy;
  std::optional<RoundCommit> commit;
  std::map<std::string, std::string> failed;  // pod name -> what failed
  std::size_t outstanding = 0;                // calls of the current step not answered yet
};

void RoundRunner::run(RoundRequest request, std::function<void()> done) {
  if (!c_.acting()) {
    done();
    return;
  }
  auto round = std::make_shared<Round>();
  round->id = ++roundSeq_;
  round->request = request;
  round->started = c_.d.scheduler.clock().now();
  round->done = std::move(done);
  advance(round);
}

void RoundRunner::advance(const RoundPtr& round) {
  // Step's values index the steps, in the order a round runs them.
  using StepFn = void (RoundRunner::*)(const RoundPtr&);
  static constexpr StepFn kSteps[] = {&RoundRunner::decide,   &RoundRunner::ping,
                                      &RoundRunner::unassign, &RoundRunner::persist,
                                      &RoundRunner::assign,   &RoundRunner::checkFailed};
  static_assert(std::size(kSteps) == static_cast<std::size_t>(Step::kCheckFailed) + 1);
  (this->*kSteps[static_cast<std::size_t>(round->step)])(round);
}

void RoundRunner::then(const RoundPtr& round, Step next) {
  round->step = next;
  advance(round);
}

// 1. Decide (pure), on the map as stored.
void RoundRunner::decide(const RoundPtr& round) {
  c_.ensureFresh([this, round](Status loaded) {
    if (!loaded.ok()) return finish(round, "failed");
    if (!c_.acting()) return finish(round, "aborted");
    auto table = c_.table();
    if (!table.ok()) {
      c_.log.error("stored status is invalid; not rebalancing",
                   {{"error", table.status().toString()}});
      c_.event(EventType::kWarning, "InvalidStatus", table.status().message());
      return finish(round, "failed");
    }
    round->table = std::move(*table);
    // Failures of shards that have another owner since (a drain, a death) no longer count.
    c_.throttle.forgetMoved(round->table, c_.current.status.pods);
    c_.d.metrics.observeThrottled(
        c_.key, c_.throttle.throttled(c_.d.scheduler.clock().now(), c_.current.spec));
    // Normally status.epoch. Higher only if an unassign of this replica carried an epoch that no
    // write has reached yet; the round then persists at least that epoch (epoch rule 3).
    round->epoch = std::max(c_.current.status.epoch, c_.fenceFloor - 1);
    for (const auto& p : c_.current.status.pods) {
      const PodHealth health = assessPod(c_.d.directory.cached(c_.ref.ns, p.name), p.uid);
      c_.runtime[p.name].terminating = health == PodHealth::kTerminating;
      // A dead pod waiting for its removal receives nothing.
      if (health_.awaitingRemoval(p)) c_.runtime[p.name].reachable = false;
      if (health == PodHealth::kDead) {
        health_.queueRemoval(p.name, "the pod informer shows it dead");
      }
    }
    auto moves = c_.decideMoves(c_.current, round->table, c_.runtimeVector(),
                                round->request.immediate, c_.d.random);
    if (!moves.ok()) {
      c_.log.error("planner refused its input", {{"error", moves.status().toString()}});
      return finish(round, "failed");
    }
    round->moves = std::move(*moves);
    then(round, Step::kPing);
  });
}

// 2. Ping the pods involved; periodic rounds and takeover ping every pod, whose answers reconcile
// what the pods hold with the map (epoch rule 4).
void RoundRunner::ping(const RoundPtr& round) {
  const auto podCount = static_cast<std::int32_t>(c_.current.status.pods.size());
  round->pings.assign(static_cast<std::size_t>(podCount), PingOutcome{});
  const bool all = !round->request.immediate || round->request.resendAll;
  const std::vector<PodIndex> targets = podsToPing(round->moves, podCount, all);
  if (targets.empty()) return then(round, Step::kUnassign);
  round->step = Step::kUnassign;
  round->outstanding = targets.size();
  for (PodIndex p : targets) {
    const sharding::RegisteredPod pod = c_.pod(p);
    auto answered = c_.strand.wrap<StatusOr<protocol::PingResponse>>(
        [this, round, p, pod](StatusOr<protocol::PingResponse> r) {
          const std::string problem =
              readPing(pod, r, c_.current.spec.shards, round->pings[static_cast<std::size_t>(p)]);
          if (!problem.empty()) round->failed[pod.name] = problem;
          if (auto it = c_.runtime.find(pod.name); it != c_.runtime.end()) {
            it->second.reachable = problem.empty();
          }
          if (--round->outstanding == 0) advance(round);
        });
    // A dead pod waiting for its removal is not asked: its answer must not lead to an assign
    // (rounds re-send what the map gives a pod it does not hold).
    if (health_.awaitingRemoval(pod)) {
      answered(failedPrecondition("dead; its shards wait for its removal"));
      continue;
    }
    c_.d.pods.ping(pod.address, c_.key, ControllerContext::targetOf(pod),
                   c_.current.spec.pingTimeout, std::move(answered));
  }
}

// 3. Unassign. Epoch rule 2: the unassign carries the epoch the following persist writes; the pod
// fences those shards against any older assign still in flight.
void RoundRunner::unassign(const RoundPtr& round) {
  if (!c_.acting()) return finish(round, "aborted");
  round->plan = planRound(round->table, round->moves, round->pings, round->request.resendAll);
  if (!round->request.immediate) {
    recordPings(c_.loads, round->table, c_.current.status.pods, round->pings);
    warnOfSilentPods();
  }
  for (const auto& [p, shards] : round->plan.strays) {
    c_.log.warn("pod holds shards the map does not give it; unassigning them",
                {{"pod", c_.pod(p).name}, {"shards", ShardSet::of(shards).toString()}});
  }
  if (round->plan.unassign.empty()) return then(round, Step::kPersist);
  const std::int64_t fence = round->epoch + 1;
  c_.fenceFloor = std::max(c_.fenceFloor, fence);
  round->step = Step::kPersist;
  round->outstanding = round->plan.unassign.size();
  for (const auto& [p, shards] : round->plan.unassign) {
    const sharding::RegisteredPod pod = c_.pod(p);
    protocol::ShardsRequest req{c_.key, ControllerContext::targetOf(pod),
                                static_cast<protocol::Epoch>(fence), ShardSet::of(shards)};
    c_.d.pods.unassign(
        pod.address, req, c_.current.spec.handoffTimeout + c_.current.spec.pingTimeout,
        c_.strand.wrap<UnassignAnswer>([this, round, podName = p, pod](UnassignAnswer answer) {
          if (!answer.status.ok()) {
            round->unassignFailed.insert(podName);
            round->failed[pod.name] = "unassign: " + answer.status.toString();
            if (!answer.busy.empty()) round->busy[podName] = answer.busy;
          }
          if (--round->outstanding == 0) advance(round);
        }));
  }
}

// 4. Persist before assigning (write-ahead): a leader that dies after the write leaves a map its
// successor finishes; one that dies before it leaves the old owners, which still hold or were
// told to release their shards, and nobody else was told to take them.
void RoundRunner::persist(const RoundPtr& round) {
  // Unassigns may have gone out at epoch + 1: the next leader bumps the epoch when it takes over
  // (epoch rule 3), and this replica does too if it leads again (fenceFloor).
  if (!c_.acting()) return finish(round, "aborted");
  // Epoch rule 3: if this replica ever sent an unassign at an epoch not yet persisted (this round
  // or a failed earlier one), this round persists, so its assigns carry at least that epoch.
  const bool mustPersist = c_.fenceFloor > c_.current.status.epoch;
  round->commit =
      commitRound(round->table, round->epoch, round->plan, round->unassignFailed, mustPersist);
  const RoundCommit& commit = *round->commit;
  recordHandoffs(round);
  ShardMap next = c_.current;
  if (commit.persist) {
    // Epoch rule 1: a persisted change of the owners is a new epoch; the moved shards' groups
    // carry it (commitRound assigned them at commit.epoch).
    sharding::writeShardTable(commit.table, next.status);
    next.status.epoch = commit.epoch;
  }
  // Before the conditions' dry run, so that this round's moves are seen cooling down. A write
  // that then fails leaves them a cooldown they did not need, which delays nothing else.
  recordMoves(c_.loads, c_.current.spec.shards, commit.applied, c_.d.scheduler.clock().now());
  const bool writesLoad = !round->request.immediate && refreshLoad(next, commit);
  c_.setConditions(next, commit.table, !round->failed.empty());
  if (next.status == c_.current.status) return then(round, Step::kAssign);
  c_.persist(std::move(next), [this, round, writesLoad](Status written) {
    // Epoch rule 6: without the write nothing is assigned. Conflict: another writer moved the
    // object on; the next round starts from what it wrote.
    if (!written.ok()) {
      return finish(round, written.code() == StatusCode::kConflict ? "conflict" : "failed");
    }
    if (writesLoad) loadWritten();
    then(round, Step::kAssign);
  });
}

// The throttle's count of this round's handoffs (handoff_throttle.h): a shard its source released
// starts over; a move abandoned because its source failed the unassign is a failure of that
// shard, unless the source answered 504 naming other shards as the busy ones (it released this
// one). The shards that enter a backoff are told in a Warning Event, one per pod and count.
void RoundRunner::recordHandoffs(const RoundPtr& round) {
  const RoundCommit& commit = *round->commit;
  const SteadyTime now = c_.d.scheduler.clock().now();
  const sharding::ShardMapSpec& spec = c_.current.spec;
  for (const Move& m : commit.applied) {
    if (m.from) c_.throttle.succeeded(m.shard);
  }
  // By source pod and failures in a row: the shards, and the backoff they entered.
  std::map<std::pair<PodIndex, std::int32_t>, std::pair<Shards, ThrottleStart>> started;
  std::size_t starts = 0;
  for (const Move& m : commit.abandoned) {
    const auto busy = round->busy.find(*m.from);
    if (busy != round->busy.end() &&
        std::find(busy->second.begin(), busy->second.end(), m.shard) == busy->second.end()) {
      continue;
    }
    if (auto start = c_.throttle.failed(m.shard, c_.pod(*m.from), now, spec)) {
      auto& [shards, first] = started[{*m.from, start->inARow}];
      if (shards.empty()) first = *start;
      shards.push_back(m.shard);
      ++starts;
    }
  }
  c_.d.metrics.observeThrottled(c_.key, c_.throttle.throttled(now, spec));
  if (starts == 0) return;
  c_.d.metrics.throttleStarted(c_.key, starts);
  for (const auto& [key, entry] : started) {
    const auto& [shards, start] = entry;
    const std::string pod = c_.pod(key.first).name;
    const std::string set = ShardSet::of(shards).toString();
    const std::string until =
        kube::formatTime(c_.d.scheduler.clock().wallNow() +
                         std::chrono::duration_cast<WallTime::duration>(start.until - now));
    c_.log.warn("handoff throttled",
                {{"pod", pod}, {"shards", set}, {"failures", start.inARow}, {"until", until}});
    c_.event(EventType::kWarning, "HandoffThrottled",
             "handoff of shard" + std::string(shards.size() > 1 ? "s " : " ") + set + " from pod " +
                 pod + " failed " + std::to_string(start.inARow) +
                 " times in a row; balancing leaves it there until " + until + " (backoff " +
                 sharding::formatDuration(start.backoff) + ")");
  }
}

// status.load with this round's write, or alone when due and changed materially (every write
// reaches every sidecar that watches the map). Returns whether `next` carries new figures.
bool RoundRunner::refreshLoad(ShardMap& next, const RoundCommit& commit) {
  if (!loadStatusDue(c_.loads, c_.d.scheduler.clock().now(), commit.persist)) return false;
  sharding::ShardMapStatus measured = next.status;
  writeLoadStatus(measured, commit.table, c_.loads);
  const auto tolerance = next.spec.balance == sharding::Balance::kLoad
                             ? std::optional<double>(next.spec.loadTolerance)
                             : std::nullopt;
  if (!commit.persist && !loadMateriallyChanged(next.status, measured, tolerance)) return false;
  next.status = std::move(measured);
  return true;
}

// After a write that carried status.load. A load the API server dropped means a CRD older than
// status.load: the refreshes pause (each would be a write of nothing) and retry later.
void RoundRunner::loadWritten() {
  const SteadyTime now = c_.d.scheduler.clock().now();
  c_.loads.statusWritten = now;
  if (c_.current.status.load) {
    c_.loads.statusDropped.reset();
    return;
  }
  c_.loads.statusDropped = now;
  if (c_.loads.droppedWarned) return;
  c_.loads.droppedWarned = true;
  const std::string why =
      "the API server dropped status.load: the installed ShardMap CRD predates it, and drops "
      "spec.balance too; apply the chart's crds/ (kubectl apply --server-side -f)";
  c_.log.warn(why, {});
  c_.event(EventType::kWarning, "OutdatedCRD", why);
}

// A load map whose pods answer without load (sidecars older than the operator) is balanced by
// count until they report: say so once.
void RoundRunner::warnOfSilentPods() {
  if (c_.loads.silent.empty()) {
    c_.loads.silentWarned = false;
    return;
  }
  if (c_.loads.silentWarned || c_.current.spec.balance != sharding::Balance::kLoad) return;
  c_.loads.silentWarned = true;
  std::string pods;
  for (const std::string& key : c_.loads.silent) pods += (pods.empty() ? "" : ", ") + key;
  c_.event(EventType::kWarning, "LoadNotReported",
           "pods answer without their load (a sidecar older than the operator): balancing by "
           "count until they do: " + pods);
}

// 5. Assign, at the persisted epoch (epoch rule 3). Assign is idempotent.
void RoundRunner::assign(const RoundPtr& round) {
  // Epoch rule 7: no assign after losing the lease, even with the write done; the next leader
  // re-sends it at its own epoch.
  if (!c_.acting()) return finish(round, "aborted");
  const RoundCommit& commit = *round->commit;
  if (commit.assign.empty()) return then(round, Step::kCheckFailed);
  round->step = Step::kCheckFailed;
  round->outstanding = commit.assign.size();
  for (const auto& [p, shards] : commit.assign) {
    const sharding::RegisteredPod pod = c_.pod(p);
    protocol::ShardsRequest req{c_.key, ControllerContext::targetOf(pod),
                                static_cast<protocol::Epoch>(commit.epoch), ShardSet::of(shards)};
    auto answered = c_.strand.wrap<StatusOr<protocol::AssignResponse>>(
        [this, round, pod](StatusOr<protocol::AssignResponse> r) {
          if (!r.ok()) {
            round->failed[pod.name] = "assign: " + r.status().toString();
          } else if (!r->refused.empty()) {
            // A fence newer than our epoch: some replica sent an unassign this one does not
            // know of. The map stays as persisted; the next round reconciles.
            round->failed[pod.name] = "assign: refused as stale: " + r->refused.toString();
            c_.log.error("pod refused an assign as stale",
                         {{"pod", pod.name}, {"shards", r->refused.toString()}});
          }
          if (--round->outstanding == 0) advance(round);
        });
    // A pod found dead since the round began gets nothing: its sidecar may have released its
    // shards, and the removal that follows relies on it holding none.
    if (health_.awaitingRemoval(pod)) {
      answered(failedPrecondition("dead; not assigned"));
      continue;
    }
    c_.d.pods.assign(pod.address, req, c_.current.spec.shards, c_.current.spec.pingTimeout,
                     std::move(answered));
  }
}

// 6. Pods that failed a step: ask the API. Dead ones are removed (and a round follows at once);
// alive ones keep their shards and get no new ones until they answer a ping.
void RoundRunner::checkFailed(const RoundPtr& round) {
  if (round->failed.empty()) {
    return finish(round, round->commit && !round->commit->applied.empty() ? "moved" : "idle");
  }
  std::set<std::string> names;
  for (const auto& [name, why] : round->failed) names.insert(name);
  health_.checkPods(names, [this, round](std::map<std::string, PodHealth> health) {
    for (const auto& [name, h] : health) {
      if (h == PodHealth::kDead) {
        health_.queueRemoval(name, "failed a rebalance step and the API shows it dead");
      } else if (auto it = c_.runtime.find(name); it != c_.runtime.end()) {
        it->second.reachable = false;
      }
    }
    finish(round, "partial");
  });
}

void RoundRunner::finish(const RoundPtr& round, std::string_view result) {
  const double seconds =
      std::chrono::duration<double>(c_.d.scheduler.clock().now() - round->started).count();
  const RoundEnd end = roundEnd(
      result,
      round->commit ? std::optional<std::size_t>(round->commit->applied.size()) : std::nullopt,
      c_.consecutiveConflicts + 1, c_.current.spec.rebalanceRetryInterval);
  c_.d.metrics.roundFinished(c_.key, result, seconds, end.moved);
  c_.log.info("rebalance round finished",
              {{"round", round->id},
               {"result", std::string(result)},
               {"moves", end.moved},
               {"epoch", c_.current.status.epoch},
               {"failed_pods", round->failed.size()},
               {"duration_ms", static_cast<std::int64_t>(seconds * 1e3)}});
  if (end.moved > 0) {
    c_.event(EventType::kNormal, "Rebalanced",
             "moved " + std::to_string(end.moved) + " shards in " +
                 std::to_string(static_cast<std::int64_t>(seconds * 1e3)) + " ms (epoch " +
                 std::to_string(c_.current.status.epoch) + ")");
  }
  if (result == "aborted") return round->done();
  if (result == "partial") {
    c_.event(EventType::kWarning, "RebalanceIncomplete",
             joinNames(round->failed) + "; retrying in " +
                 sharding::formatDuration(c_.current.spec.rebalanceRetryInterval));
  }
  c_.retryPending = end.failed;
  if (!c_.acting()) return round->done();
  if (result == "conflict") ++c_.consecutiveConflicts;
  if (end.retryIn) queue_.retryRoundIn(*end.retryIn);
  queue_.schedulePeriodic();
  writeConditions(round);
}

// 7. Conditions: the persist above wrote them as of the unassign step; assign failures are known
// only now. Written only when they changed.
void RoundRunner::writeConditions(const RoundPtr& round) {
  if (c_.stale) return round->done();
  auto table = c_.table();
  ShardMap next = c_.current;
  if (table.ok()) c_.setConditions(next, *table, c_.retryPending);
  if (next.status == c_.current.status) return round->done();
  c_.persist(std::move(next), [round](Status) { round->done(); });
}

}  // namespace kshard::manager
