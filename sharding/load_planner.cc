#include "sharding/load_planner.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <span>
#include <string>
#include <utility>

namespace kshard::sharding {
namespace {

Status validateLoadInput(const LoadPlanningInput& in) {
  if (Status s = validatePlanningInput(in.base); !s.ok()) return s;
  const auto shards = static_cast<std::size_t>(in.base.shardCount);
  if (in.base.immediate) {
    return invalidArgument("an immediate round places shards: the count planner decides it");
  }
  if (in.load.size() != shards) {
    return invalidArgument("load has " + std::to_string(in.load.size()) + " entries for " +
                           std::to_string(shards) + " shards");
  }
  for (std::size_t i = 0; i < shards; ++i) {
    if (!std::isfinite(in.load[i]) || in.load[i] < 0) {
      return invalidArgument("shard " + std::to_string(i + 1) +
                             " has a load that is negative or not finite");
    }
  }
  if (!in.base.withheld.empty() && in.base.withheld.size() != shards) {
    return invalidArgument("withheld has " + std::to_string(in.base.withheld.size()) +
                           " entries for " + std::to_string(shards) + " shards");
  }
  if (!in.roundsSinceMoved.empty() && in.roundsSinceMoved.size() != shards) {
    return invalidArgument("roundsSinceMoved has " + std::to_string(in.roundsSinceMoved.size()) +
                           " entries for " + std::to_string(shards) + " shards");
  }
  if (!(in.tolerance > 0 && in.tolerance <= 10)) {
    return invalidArgument("tolerance must be > 0 and <= 10");
  }
  if (in.cooldownRounds < 0) return invalidArgument("cooldownRounds must be >= 0");
  if (!(in.minMeanLoad >= 0 && std::isfinite(in.minMeanLoad))) {
    return invalidArgument("minMeanLoad must be finite and >= 0");
  }
  return {};
}

// A pod's load with its index, ordered lightest first and, on equal load, registered first.
using PodLoad = std::pair<double, PodIndex>;
// A shard's load with its id, ordered lightest first and, on equal load, lower id first.
using ShardLoad = std::pair<double, ShardId>;

// The donor's shard to move to a receiver with room `room`: the heaviest candidate that takes the
// donor no lower than the mean (load <= excess), else the lightest candidate (it overshoots the
// least); end() when no candidate fits in `room`.
std::set<ShardLoad>::iterator pickShard(std::set<ShardLoad>& candidates, double room,
                                        double excess) {
  // Past the last shard whose load is at most `limit`.
  const auto past = [&](double limit) {
    return candidates.upper_bound({limit, kMaxShardCount + 1});
  };
  if (const auto within = past(std::min(room, excess)); within != candidates.begin()) {
    return candidates.lower_bound({std::prev(within)->first, 0});  // the lowest id of that load
  }
  return past(room) != candidates.begin() ? candidates.begin() : candidates.end();
}

// What one round works on: the pods' loads, the receivers ordered by load, the budget.
struct Round {
  std::vector<double> podLoad;
  std::vector<bool> canReceive;
  std::set<PodLoad> receivers;
  std::int32_t budget = 0;
  double receiverCap = 0;  // (1 + tolerance) x mean: no move takes a receiver above it
  std::vector<Move> moves;

  void stopReceiving(PodIndex p) {
    const auto i = static_cast<std::size_t>(p);
    if (canReceive[i]) receivers.erase({podLoad[i], p});
    canReceive[i] = false;
  }

  void move(ShardId shard, double load, PodIndex from, PodIndex to) {
    moves.push_back({shard, from, to});
    --budget;
    podLoad[static_cast<std::size_t>(from)] -= load;
    receivers.erase({podLoad[static_cast<std::size_t>(to)], to});
    podLoad[static_cast<std::size_t>(to)] += load;
    receivers.insert({podLoad[static_cast<std::size_t>(to)], to});
  }

  // Moves shards off `donor` while it is above its target, the budget lasts and a receiver has
  // room for one of its candidates.
  void relieve(PodIndex donor, double target, std::set<ShardLoad> candidates, double mean) {
    stopReceiving(donor);  // it gives in this round, so it takes nothing back
    const auto d = static_cast<std::size_t>(donor);
    while (podLoad[d] > target && budget > 0 && !receivers.empty() && !candidates.empty()) {
      const auto [receiverLoad, receiver] = *receivers.begin();
      const auto pick = pickShard(candidates, receiverCap - receiverLoad, podLoad[d] - mean);
      if (pick == candidates.end()) return;
      const auto [load, shard] = *pick;
      candidates.erase(pick);
      move(shard, load, donor, receiver);
    }
  }
};

// Each donor's movable shards: loaded, out of their cooldown, not withheld.
std::vector<std::set<ShardLoad>> movableShards(const LoadPlanningInput& in,
                                               const std::vector<bool>& isDonor) {
  std::vector<std::set<ShardLoad>> movable(in.base.pods.size());
  for (std::size_t i = 0; i < in.base.owners.size(); ++i) {
    const PodIndex owner = in.base.owners[i];
    if (owner == kNoPod || !isDonor[static_cast<std::size_t>(owner)] || in.load[i] <= 0) continue;
    if (!in.roundsSinceMoved.empty() && in.roundsSinceMoved[i] < in.cooldownRounds) continue;
    if (!in.base.withheld.empty() && in.base.withheld[i]) continue;
    movable[static_cast<std::size_t>(owner)].insert({in.load[i], static_cast<ShardId>(i + 1)});
  }
  return movable;
}

// summarizeLoad, from the pods' loads already summed.
LoadSummary summaryOf(const std::vector<double>& podLoad, std::span<const double> load) {
  const std::size_t podCount = podLoad.size();
  double hottest = 0;
  double total = 0;
  for (double l : load) {
    hottest = std::max(hottest, l);
    total += l;
  }
  LoadSummary summary;
  if (podCount == 0 || total <= 0) return summary;
  summary.mean = total / static_cast<double>(podCount);
  summary.peak = *std::max_element(podLoad.begin(), podLoad.end());
  summary.peakToMean = summary.peak / summary.mean;
  summary.bound = std::max(1.0, hottest / summary.mean);
  return summary;
}

}  // namespace

std::vector<double> podLoads(const std::vector<PodIndex>& owners, std::size_t podCount,
                             const std::vector<double>& load) {
  std::vector<double> podLoad(podCount, 0);
  for (std::size_t i = 0; i < owners.size() && i < load.size(); ++i) {
    if (owners[i] != kNoPod) podLoad[static_cast<std::size_t>(owners[i])] += load[i];
  }
  return podLoad;
}

LoadSummary summarizeLoad(const std::vector<PodIndex>& owners, std::size_t podCount,
                          const std::vector<double>& load) {
  // Shards beyond either list are not counted (as podLoads does).
  return summaryOf(podLoads(owners, podCount, load),
                   std::span<const double>(load).first(std::min(owners.size(), load.size())));
}

StatusOr<std::vector<Move>> decideByLoad(const LoadPlanningInput& in) {
  if (Status s = validateLoadInput(in); !s.ok()) return s;
  const PlanningInput& base = in.base;
  const bool unassigned =
      std::find(base.owners.begin(), base.owners.end(), kNoPod) != base.owners.end();
  if (base.pods.empty() || unassigned || !allSameVersion(base.pods)) return std::vector<Move>{};

  std::vector<double> podLoad = podLoads(base.owners, base.pods.size(), in.load);
  const LoadSummary summary = summaryOf(podLoad, in.load);
  if (summary.mean <= in.minMeanLoad || summary.mean <= 0) return std::vector<Move>{};
  Round round{.podLoad = std::move(podLoad),
              .canReceive = eligibleReceivers(base.pods),
              .receivers = {},
              .budget = periodicReceiveCap(base.shardCount, base.rebalanceRate),
              .receiverCap = (1 + in.tolerance) * summary.mean,
              .moves = {}};
  // Each pod's target: the receivers' cap, or its own hottest shard, which it cannot go below.
  std::vector<double> target(base.pods.size(), round.receiverCap);
  for (std::size_t i = 0; i < base.owners.size(); ++i) {
    const auto owner = static_cast<std::size_t>(base.owners[i]);
    target[owner] = std::max(target[owner], in.load[i]);
  }
  std::vector<PodIndex> donors;
  std::vector<bool> isDonor(base.pods.size(), false);
  for (std::size_t p = 0; p < base.pods.size(); ++p) {
    const auto pod = static_cast<PodIndex>(p);
    if (round.canReceive[p]) round.receivers.insert({round.podLoad[p], pod});
    if (round.podLoad[p] > target[p]) {
      donors.push_back(pod);
      isDonor[p] = true;
    }
  }
  std::sort(donors.begin(), donors.end(), [&](PodIndex a, PodIndex b) {
    const double la = round.podLoad[static_cast<std::size_t>(a)];
    const double lb = round.podLoad[static_cast<std::size_t>(b)];
    return la != lb ? la > lb : a < b;
  });
  std::vector<std::set<ShardLoad>> movable = movableShards(in, isDonor);
  for (PodIndex donor : donors) {
    if (round.budget <= 0) break;
    const auto d = static_cast<std::size_t>(donor);
    round.relieve(donor, target[d], std::move(movable[d]), summary.mean);
  }
  return std::move(round.moves);
}

}  // namespace kshard::sharding
