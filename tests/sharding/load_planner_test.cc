// The load planner (sharding/load_planner.h): its rules on examples, and its invariants and
// convergence over thousands of random, seeded maps with skewed loads.
#include "sharding/load_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace kshard::sharding {
namespace {

// `pods` ready pods of one version; shard i + 1 owned by owners[i] with load loads[i].
LoadPlanningInput mapOf(std::size_t pods, std::vector<PodIndex> owners, std::vector<double> loads) {
  LoadPlanningInput in;
  in.base.shardCount = static_cast<std::int32_t>(owners.size());
  in.base.pods.assign(pods, PlannerPod{"1.0.0", true, false});
  in.base.owners = std::move(owners);
  in.base.rebalanceRate = 1.0;
  in.load = std::move(loads);
  return in;
}

std::vector<Move> decideOrFail(const LoadPlanningInput& in) {
  StatusOr<std::vector<Move>> moves = decideByLoad(in);
  EXPECT_TRUE(moves.ok()) << moves.status().toString();
  return moves.valueOr({});
}

void apply(LoadPlanningInput& in, const std::vector<Move>& moves) {
  for (std::int32_t& rounds : in.roundsSinceMoved) ++rounds;
  for (const Move& m : moves) {
    in.base.owners[static_cast<std::size_t>(m.shard - 1)] = m.to;
    if (!in.roundsSinceMoved.empty())
      in.roundsSinceMoved[static_cast<std::size_t>(m.shard - 1)] = 0;
  }
}

TEST(LoadPlanner, RefusesInputItCannotPlanWith) {
  LoadPlanningInput in = mapOf(2, {0, 1}, {1, 1});
  in.load = {1};
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
  in.load = {1, -1};
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
  in.load = {1, NAN};
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
  in.load = {1, 1};
  in.tolerance = 0;
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
  in.tolerance = 0.1;
  in.roundsSinceMoved = {1};
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
  in.roundsSinceMoved = {};
  in.base.immediate = true;
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
  in.base.immediate = false;
  in.base.owners = {0, 2};
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
}

TEST(LoadPlanner, EqualCountsWithOneHotPodMoveItsShardsToTheColdest) {
  // Pod 0 holds 4 + 1 + 1 = 6, pod 1 holds 2, pod 2 holds 1: mean 3, target 3.3.
  LoadPlanningInput in = mapOf(3, {0, 0, 0, 1, 1, 2}, {4, 1, 1, 1, 1, 1});
  in.load = {2, 2, 2, 1, 1, 1};
  const std::vector<Move> moves = decideOrFail(in);
  // The heaviest shard within the donor's excess (6 - 3 = 3) that fits the coldest pod (room
  // 3.3 - 1): shard 1 (load 2) to pod 2. Then the donor is at 4 > 3.3 and the coldest is pod 1 at
  // 2 (room 1.3): no shard of load 2 fits, so the donor waits.
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0], (Move{1, 0, 2}));
}

TEST(LoadPlanner, ABalancedMapIsLeftAlone) {
  LoadPlanningInput in = mapOf(3, {0, 1, 2, 0, 1, 2}, {5, 5, 4, 1, 1, 1.5});
  EXPECT_TRUE(decideOrFail(in).empty());
}

TEST(LoadPlanner, TheHottestShardSetsTheTargetAndItsPodKeepsItAlone) {
  // Shard 1 alone is 10 of a total 16 (mean 16 / 4 = 4): no pod can be below 10, so the target
  // is 10 and its pod gives away everything else it holds.
  LoadPlanningInput in = mapOf(4, {0, 0, 0, 1, 2, 3}, {10, 2, 1, 1, 1, 1});
  const std::vector<Move> moves = decideOrFail(in);
  apply(in, moves);
  const LoadSummary after = summarizeLoad(in.base.owners, 4, in.load);
  EXPECT_DOUBLE_EQ(after.bound, 10.0 / 4.0);
  EXPECT_DOUBLE_EQ(after.peakToMean, after.bound);
  EXPECT_EQ(in.base.owners[0], 0);
  EXPECT_EQ(std::count(in.base.owners.begin(), in.base.owners.end(), 0), 1);
}

TEST(LoadPlanner, OneHotShardExemptsOnlyItsOwnPod) {
  // Pod 0 holds one shard of 100; pod 1 holds 80 shards of 1; pods 2 and 3 hold nothing. The
  // mean is 45: pod 0 cannot go below 100, but pod 1 still gives down to 49.5 (1.1 x 45).
  std::vector<PodIndex> owners(81, 1);
  owners[0] = 0;
  std::vector<double> load(81, 1.0);
  load[0] = 100;
  LoadPlanningInput in = mapOf(4, owners, load);
  in.base.rebalanceRate = 1;
  const std::vector<Move> moves = decideOrFail(in);
  apply(in, moves);
  const std::vector<double> after = podLoads(in.base.owners, 4, in.load);
  EXPECT_EQ(after[0], 100);
  EXPECT_LE(after[1], 49.5);
  for (const Move& m : moves) EXPECT_NE(m.shard, 1);
}

TEST(LoadPlanner, NothingMovesWhileTheMeanIsAtOrBelowTheMinimum) {
  // The same skew as EqualCountsWithOneHotPod..., but at a millionth of the load.
  LoadPlanningInput in = mapOf(3, {0, 0, 0, 1, 1, 2}, {4e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6});
  in.minMeanLoad = 3e-6;  // the mean
  EXPECT_TRUE(decideOrFail(in).empty());
  in.minMeanLoad = 2e-6;
  EXPECT_FALSE(decideOrFail(in).empty());
  in.minMeanLoad = -1;
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
}

TEST(LoadPlanner, ShardsInTheirCooldownOrWithoutLoadStay) {
  LoadPlanningInput in = mapOf(2, {0, 0, 0}, {3, 0, 3});
  in.roundsSinceMoved = {0, 5, 5};
  in.cooldownRounds = 3;
  const std::vector<Move> moves = decideOrFail(in);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].shard, 3);
}

TEST(LoadPlanner, WithheldShardsStay) {
  // Shard 1 is the best pick (the heaviest that keeps the donor at or above the mean); withheld,
  // the donor gives the next one instead; all withheld, nothing.
  LoadPlanningInput in = mapOf(2, {0, 0, 0}, {3, 2, 3});
  const std::vector<Move> free = decideOrFail(in);
  ASSERT_EQ(free.size(), 1u);
  in.base.withheld = {free[0].shard == 1, free[0].shard == 2, free[0].shard == 3};
  const std::vector<Move> moves = decideOrFail(in);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_NE(moves[0].shard, free[0].shard);
  in.base.withheld = {true, true, true};
  EXPECT_TRUE(decideOrFail(in).empty());
  in.base.withheld = {true};
  EXPECT_EQ(decideByLoad(in).status().code(), StatusCode::kInvalidArgument);
}

TEST(LoadPlanner, NothingMovesDuringARollingUpdateOrWithUnassignedShards) {
  LoadPlanningInput in = mapOf(2, {0, 0, 0, 0}, {1, 1, 1, 1});
  in.base.pods[1].version = "2.0.0";
  EXPECT_TRUE(decideOrFail(in).empty());
  in.base.pods[1].version = "1.0.0";
  in.base.owners[3] = kNoPod;
  EXPECT_TRUE(decideOrFail(in).empty());
}

TEST(LoadPlanner, ARoundMovesNoMoreThanItsBudget) {
  std::vector<PodIndex> owners(100, 0);
  LoadPlanningInput in = mapOf(10, owners, std::vector<double>(100, 1.0));
  in.base.rebalanceRate = 0.05;
  EXPECT_EQ(decideOrFail(in).size(), 5u);
}

// A random map: up to 300 shards over up to 20 pods, Zipf-like loads, skewed ownership, some
// pods not ready or terminating, sometimes two versions.
LoadPlanningInput randomMap(Random& r) {
  const auto shards = static_cast<std::size_t>(1 + r.uniform(300));
  const auto pods = static_cast<std::size_t>(1 + r.uniform(20));
  std::vector<PodIndex> owners(shards);
  std::vector<double> loads(shards);
  const double exponent = 2 * r.unit();
  for (std::size_t i = 0; i < shards; ++i) {
    const std::uint64_t a = r.uniform(pods);
    owners[i] = static_cast<PodIndex>(r.uniform(2) == 0 ? a : std::min(a, r.uniform(pods)));
    loads[i] =
        r.uniform(10) == 0 ? 0 : 1 / std::pow(1 + static_cast<double>(r.uniform(shards)), exponent);
  }
  LoadPlanningInput in = mapOf(pods, std::move(owners), std::move(loads));
  for (PlannerPod& p : in.base.pods) {
    p.ready = r.uniform(10) != 0;
    p.terminating = r.uniform(15) == 0;
  }
  if (r.uniform(10) == 0) in.base.pods[0].version = "0.9.0";
  in.base.rebalanceRate = r.uniform(3) == 0 ? 1.0 : 0.01 + 0.2 * r.unit();
  in.tolerance = 0.02 + 0.3 * r.unit();
  in.cooldownRounds = static_cast<std::int32_t>(r.uniform(4));
  in.roundsSinceMoved.assign(shards, static_cast<std::int32_t>(r.uniform(6)));
  return in;
}

// Every round keeps one owner per shard, moves only from owners to eligible pods that gave
// nothing, keeps each receiver within (1 + tolerance) x mean and moves no more than the budget.
TEST(LoadPlannerProperties, RoundsKeepTheInvariantsTheOperatorReliesOn) {
  SeededRandom r(7);
  for (int i = 0; i < 3000; ++i) {
    const LoadPlanningInput in = randomMap(r);
    const std::vector<Move> moves = decideOrFail(in);
    const std::vector<bool> eligible = eligibleReceivers(in.base.pods);
    const LoadSummary before = summarizeLoad(in.base.owners, in.base.pods.size(), in.load);
    const double cap = (1 + in.tolerance) * before.mean;
    std::vector<double> podLoad(in.base.pods.size(), 0);
    for (std::size_t s = 0; s < in.load.size(); ++s) {
      podLoad[static_cast<std::size_t>(in.base.owners[s])] += in.load[s];
    }
    std::set<ShardId> moved;
    std::set<PodIndex> gave;
    std::set<PodIndex> took;
    ASSERT_LE(moves.size(), static_cast<std::size_t>(
                                periodicReceiveCap(in.base.shardCount, in.base.rebalanceRate)));
    for (const Move& m : moves) {
      const auto s = static_cast<std::size_t>(m.shard - 1);
      ASSERT_TRUE(moved.insert(m.shard).second) << "shard " << m.shard << " moved twice";
      ASSERT_EQ(m.from, in.base.owners[s]);
      ASSERT_NE(m.to, *m.from);
      ASSERT_TRUE(eligible[static_cast<std::size_t>(m.to)]);
      ASSERT_GT(in.load[s], 0);
      ASSERT_GE(in.roundsSinceMoved[s], in.cooldownRounds);
      gave.insert(*m.from);
      took.insert(m.to);
      podLoad[static_cast<std::size_t>(*m.from)] -= in.load[s];
      podLoad[static_cast<std::size_t>(m.to)] += in.load[s];
      ASSERT_LE(podLoad[static_cast<std::size_t>(m.to)], cap * (1 + 1e-9));
    }
    for (PodIndex p : gave) ASSERT_EQ(took.count(p), 0u) << "pod " << p << " gave and took";
  }
}

// With fixed loads and every pod ready, rounds stop moving: each move lowers the load above the
// target, which no move adds to. Settled means no move for longer than the cooldown.
TEST(LoadPlannerProperties, RoundsSettleWithFixedLoads) {
  SeededRandom r(11);
  for (int i = 0; i < 1000; ++i) {
    LoadPlanningInput in = randomMap(r);
    for (PlannerPod& p : in.base.pods) p = PlannerPod{"1.0.0", true, false};
    int quiet = 0;
    for (int round = 0; round < 500 && quiet <= in.cooldownRounds; ++round) {
      const std::vector<Move> moves = decideOrFail(in);
      apply(in, moves);
      quiet = moves.empty() ? quiet + 1 : 0;
    }
    ASSERT_GT(quiet, in.cooldownRounds) << "map " << i << " never settled";
  }
}

}  // namespace
}  // namespace kshard::sharding
