#include "operator/round_plan.h"

#include <algorithm>

namespace kshard::manager {
namespace {

void addShard(ShardsByPod& byPod, PodIndex pod, ShardId shard) { byPod[pod].push_back(shard); }

void sortAndDedupe(ShardsByPod& byPod) {
  for (auto& [pod, shards] : byPod) {
    std::sort(shards.begin(), shards.end());
    shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  }
}

bool answered(const std::vector<PingOutcome>& pings, PodIndex pod) {
  return pod >= 0 && static_cast<std::size_t>(pod) < pings.size() &&
         pings[static_cast<std::size_t>(pod)].state == PingOutcome::State::kAnswered;
}

}  // namespace

sharding::PlanningInput planningInput(const sharding::ShardMap& map,
                                      const sharding::ShardTable& table,
                                      const std::vector<PodRuntime>& pods, bool immediate) {
  sharding::PlanningInput in;
  in.shardCount = table.shardCount();
  in.owners.assign(table.owners().begin(), table.owners().end());
  in.immediate = immediate;
  in.rebalanceRate = map.spec.rebalanceRate;
  in.pods.reserve(map.status.pods.size());
  for (std::size_t i = 0; i < map.status.pods.size(); ++i) {
    const PodRuntime rt = i < pods.size() ? pods[i] : PodRuntime{};
    sharding::PlannerPod p;
    p.version = map.status.pods[i].version;
    // A pod the operator cannot reach would not acknowledge an assign: give it nothing new.
    p.ready = rt.reachable;
    // Draining pods (terminating, or unregistering) are about to leave; whatever they received
    // would have to move again at once.
    p.terminating = rt.terminating || rt.leaving;
    in.pods.push_back(std::move(p));
  }
  return in;
}

std::vector<PodIndex> podsToPing(const std::vector<Move>& moves, std::int32_t podCount, bool all) {
  std::vector<PodIndex> out;
  if (all) {
    for (PodIndex p = 0; p < podCount; ++p) out.push_back(p);
    return out;
  }
  std::set<PodIndex> pods;
  for (const Move& m : moves) {
    if (m.from) pods.insert(*m.from);
    pods.insert(m.to);
  }
  return {pods.begin(), pods.end()};
}

RoundPlan planRound(const sharding::ShardTable& table, std::vector<Move> moves,
                    const std::vector<PingOutcome>& pings, bool resendAll) {
  RoundPlan plan;
  // A move touching a pod that did not answer is dropped: an unanswered unassign would block the
  // round until its timeout, and an unanswered assign would leave the shard unserved.
  for (Move& m : moves) {
    if ((m.from && !answered(pings, *m.from)) || !answered(pings, m.to)) {
      plan.dropped.push_back(m);
    } else {
      if (m.from) addShard(plan.unassign, *m.from, m.shard);
      plan.moves.push_back(m);
    }
  }
  for (std::size_t i = 0; i < pings.size(); ++i) {
    if (pings[i].state != PingOutcome::State::kAnswered) continue;
    const auto pod = static_cast<PodIndex>(i);
    std::vector<bool> holds(static_cast<std::size_t>(table.shardCount()) + 1, false);
    for (ShardId s : pings[i].held) {
      if (s < 1 || s > table.shardCount()) continue;
      holds[static_cast<std::size_t>(s)] = true;
      // Epoch rule 4: a pod serving a shard the map does not give it (a delayed duplicate
      // assign, a deposed leader's assign) could run an entity another pod also runs.
      if (table.owner(s) != pod) {
        addShard(plan.unassign, pod, s);
        addShard(plan.strays, pod, s);
      }
    }
    // Epoch rule 4: a shard the map gives this pod that it does not hold is unserved.
    table.shardsOf(pod).forEach([&](ShardId s) {
      if (resendAll || !holds[static_cast<std::size_t>(s)]) addShard(plan.resend, pod, s);
    });
  }
  sortAndDedupe(plan.unassign);
  sortAndDedupe(plan.strays);
  sortAndDedupe(plan.resend);
  return plan;
}

RoundCommit commitRound(const sharding::ShardTable& table, std::int64_t currentEpoch,
                        const RoundPlan& plan, const std::set<PodIndex>& unassignFailed,
                        bool mustPersist) {
  RoundCommit c{table, {}, {}, false, currentEpoch, {}};
  const std::int64_t next = currentEpoch + 1;
  for (const Move& m : plan.moves) {
    // Only a shard its source has released may get a new owner: the source acknowledged that
    // the shard's entities are stopped. Without that acknowledgement the move is abandoned.
    if (m.from && unassignFailed.count(*m.from)) {
      c.abandoned.push_back(m);
    } else {
      c.applied.push_back(m);
    }
  }
  c.persist = mustPersist || !c.applied.empty() || !plan.unassign.empty();
  if (c.persist) c.epoch = next;
  for (const Move& m : c.applied) {
    c.table.assign(m.shard, m.to, next);
    addShard(c.assign, m.to, m.shard);
  }
  for (const auto& [pod, shards] : plan.resend) {
    for (ShardId s : shards) {
      if (c.table.owner(s) == pod) addShard(c.assign, pod, s);
    }
  }
  for (const Move& m : c.abandoned) {
    if (c.table.owner(m.shard) == *m.from) addShard(c.assign, *m.from, m.shard);
  }
  sortAndDedupe(c.assign);
  return c;
}

bool balancedWithinOne(const std::vector<std::int32_t>& counts) {
  if (counts.empty()) return true;
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  return *hi - *lo <= 1;
}

std::string readPing(const sharding::RegisteredPod& pod,
                     const StatusOr<protocol::PingResponse>& answer, std::int32_t shardCount,
                     PingOutcome& out) {
  std::string problem;
  if (!answer.ok()) {
    problem = "ping: " + answer.status().toString();
  } else if (answer->pod != pod.name || answer->uid != pod.uid ||
             answer->incarnation != pod.incarnation) {
    problem = "ping: answered by pod " + answer->pod + " (uid " + answer->uid + ", incarnation " +
              answer->incarnation + ")";
  } else {
    auto held = sharding::ShardSet::parse(answer->shards, shardCount);
    if (!held.ok()) {
      problem = "ping: " + held.status().message();
    } else {
      out.state = PingOutcome::State::kAnswered;
      held->forEach([&](sharding::ShardId s) { out.held.push_back(s); });
      if (answer->load) {
        out.reportsLoad = true;
        for (const auto& entry : *answer->load) {
          if (entry.first <= shardCount) out.load.push_back(entry);
        }
      }
    }
  }
  if (!problem.empty()) out.state = PingOutcome::State::kFailed;
  return problem;
}

RoundEnd roundEnd(std::string_view result, std::optional<std::size_t> applied, int conflictsInARow,
                  Duration retryInterval) {
  RoundEnd end;
  const bool reachedAssign = result != "conflict" && result != "failed" && result != "aborted";
  if (applied && reachedAssign) end.moved = static_cast<std::int64_t>(*applied);
  end.failed = result == "partial" || result == "failed" || result == "conflict";
  if (result == "conflict") {
    // Another writer moved the object on: reload and go again at once, then back off.
    end.retryIn = conflictsInARow <= 1 ? Duration{0} : retryInterval;
  } else if (end.failed) {
    end.retryIn = retryInterval;
  }
  return end;
}

}  // namespace kshard::manager
