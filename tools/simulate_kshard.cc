#include "tools/simulate_kshard.h"

#include <algorithm>
#include <utility>

#include "sharding/version.h"

namespace kshard::tools {

KshardManager::KshardManager(Scheduler& scheduler, OwnershipLedger& ledger,
                             const SimulatedDeployment& deployment, KshardParams params,
                             Random& random)
    : SimulatedManager(scheduler, ledger, deployment),
      params_(params),
      random_(random),
      round_(scheduler, [this] { startRound(); }) {}

void KshardManager::reindex() {
  indexOf_.assign(deployment_.pods().size(), sharding::kNoPod);
  for (std::size_t i = 0; i < registered_.size(); ++i) {
    indexOf_[static_cast<std::size_t>(registered_[i])] = static_cast<sharding::PodIndex>(i);
  }
}

void KshardManager::startWith(const std::vector<SimPod>& pods) {
  registered_ = pods;
  // The first register's immediate round, with every pod already registered: the planner
  // spreads all shards evenly.
  StatusOr<std::vector<PendingMove>> moves = decide(/*immediate=*/true);
  if (!moves.ok()) {
    error_ = moves.status();
    return;
  }
  for (const PendingMove& m : *moves) ledger_.assign(m.shard, m.to);
  ledger_.commit(now());
  confirmed_ = true;
  scheduler_.runAfter(params_.rebalanceInterval, [this] { tick(); });
}

StatusOr<std::vector<KshardManager::PendingMove>> KshardManager::decide(bool immediate) {
  reindex();
  sharding::PlanningInput input;
  input.shardCount = ledger_.shardCount();
  input.immediate = immediate;
  input.rebalanceRate = params_.rebalanceRate;
  input.pods.reserve(registered_.size());
  for (SimPod p : registered_) {
    const SimPodInfo& info = deployment_.pod(p);
    // A crash not yet noticed looks like a healthy pod to the operator.
    input.pods.push_back({info.version, /*ready=*/true, info.phase == PodPhase::kTerminating});
  }
  input.owners.resize(static_cast<std::size_t>(input.shardCount));
  for (sharding::ShardId s = 1; s <= input.shardCount; ++s) {
    const SimPod owner = ledger_.owner(s);
    input.owners[static_cast<std::size_t>(s - 1)] =
        owner == kNoSimPod ? sharding::kNoPod : indexOf_[static_cast<std::size_t>(owner)];
  }
  StatusOr<std::vector<sharding::Move>> decided = sharding::decide(input, random_);
  if (!decided.ok()) return decided.status();
  std::vector<PendingMove> moves;
  moves.reserve(decided->size());
  for (const sharding::Move& m : *decided) {
    moves.push_back({m.shard, m.from ? registered_[static_cast<std::size_t>(*m.from)] : kNoSimPod,
                     registered_[static_cast<std::size_t>(m.to)]});
  }
  return moves;
}

void KshardManager::request(Trigger trigger) {
  pending_ = std::max(pending_, trigger);
  if (!roundRunning_) scheduleRound();
}

void KshardManager::scheduleRound() {
  // After the other events of this instant: pods registering together meet one round.
  if (pending_ != Trigger::kNone) round_.request();
}

void KshardManager::startRound() {
  const bool immediate = pending_ == Trigger::kImmediate;
  pending_ = Trigger::kNone;
  ++roundsRun_;
  StatusOr<std::vector<PendingMove>> moves = decide(immediate);
  if (!moves.ok()) {
    if (error_.ok()) error_ = moves.status();
    return;
  }
  if (moves->empty()) {
    if (!immediate) confirmed_ = true;
    return;
  }
  confirmed_ = false;
  roundRunning_ = true;
  scheduler_.runAfter(params_.roundTime, [this, m = std::move(*moves)] { finishRound(m); });
}

void KshardManager::finishRound(const std::vector<PendingMove>& moves) {
  bool failed = false;
  for (const PendingMove& m : moves) {
    // The target must still be registered (ready or draining) and alive.
    const SimPodInfo& to = deployment_.pod(m.to);
    const bool toOk =
        (to.phase == PodPhase::kReady || to.phase == PodPhase::kTerminating) && !to.crashed;
    // An owner that crashed cannot confirm the unassign. One that unregistered during the round
    // has released the shard already: placing it is fine.
    const bool fromOk = m.from == kNoSimPod || !deployment_.pod(m.from).crashed ||
                        deployment_.pod(m.from).phase == PodPhase::kGone;
    if (!toOk || !fromOk) {
      failed = true;
      continue;
    }
    ledger_.assign(m.shard, m.to);
  }
  ledger_.commit(now());
  roundRunning_ = false;
  if (failed) {
    scheduler_.runAfter(params_.rebalanceRetryInterval, [this] { request(Trigger::kPeriodic); });
  }
  scheduleRound();
}

void KshardManager::tick() {
  request(Trigger::kPeriodic);
  scheduler_.runAfter(params_.rebalanceInterval, [this] { tick(); });
}

void KshardManager::podReady(SimPod pod) {
  registered_.push_back(pod);
  confirmed_ = false;
  if (registered_.size() == 1 || ledger_.unassignedCount() > 0) request(Trigger::kImmediate);
}

void KshardManager::podTerminating(SimPod /*pod*/) {
  // It takes no new shards from now on (the planner sees `terminating`); no round is triggered.
  confirmed_ = false;
}

void KshardManager::podCrashed(SimPod /*pod*/) {
  // The operator learns of a crash only when the death is noticed (podDied).
  confirmed_ = false;
}

void KshardManager::unregister(SimPod pod) {
  const auto it = std::find(registered_.begin(), registered_.end(), pod);
  if (it == registered_.end()) return;
  registered_.erase(it);
  const auto span = ledger_.shardsOf(pod);
  const std::vector<sharding::ShardId> shards(span.begin(), span.end());
  for (sharding::ShardId s : shards) ledger_.release(s);
  confirmed_ = false;
  request(Trigger::kImmediate);
}

std::optional<SimTime> KshardManager::holdUnregister(SimPod pod) {
  const SimPodInfo& info = deployment_.pod(pod);
  if (scheduler_.clock().now() >= info.deletedAt + params_.maxUnregisterHold) return std::nullopt;
  // A newer pod that has not registered yet will take this pod's shards if it waits; if it left
  // now they would go to the other old pods, and move again when those leave.
  for (const std::string& version : deployment_.startingVersions()) {
    if (sharding::compareVersions(version, info.version) > 0) return params_.unregisterRetryAfter;
  }
  return std::nullopt;
}

void KshardManager::podGone(SimPod pod) { unregister(pod); }

bool KshardManager::settled() const {
  return !roundRunning_ && !round_.pending() && pending_ == Trigger::kNone && confirmed_;
}

}  // namespace kshard::tools
