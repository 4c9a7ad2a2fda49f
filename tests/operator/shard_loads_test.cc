// The operator's load bookkeeping (operator/shard_loads.h): what the ping answers report, the load
// planner's input, status.load, and the Balanced condition of spec.balance: load. Pure.
#include "operator/shard_loads.h"

#include <gtest/gtest.h>

#include <limits>

#include "operator/shard_map_conditions.h"

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

PingOutcome answered(Shards held, std::vector<std::pair<ShardId, double>> load) {
  return {PingOutcome::State::kAnswered, std::move(held), std::move(load), true};
}

const SteadyTime kT0{std::chrono::hours(1)};

// Registered pods p0..p3: pings[i] is pods[i]'s answer.
const std::vector<sharding::RegisteredPod> kPods = [] {
  std::vector<sharding::RegisteredPod> pods;
  for (int i = 0; i < 4; ++i) {
    const std::string n = "p" + std::to_string(i);
    pods.push_back({n, "u" + n, "x:1", "1", 0, "i", {}});
  }
  return pods;
}();

sharding::ShardMapStatus twoPods() {
  sharding::ShardMapStatus s;
  s.pods = {{"a", "ua", "x:1", "1", 0, "i", {}}, {"b", "ub", "x:2", "1", 0, "i", {}}};
  return s;
}

// A table of `n` shards whose shard s is owned by owners[s - 1] (kNoPod: none).
sharding::ShardTable tableOf(std::vector<PodIndex> owners) {
  sharding::ShardTable t(static_cast<std::int32_t>(owners.size()));
  for (std::size_t i = 0; i < owners.size(); ++i) {
    if (owners[i] != sharding::kNoPod) t.assign(static_cast<ShardId>(i + 1), owners[i], 1);
  }
  return t;
}

TEST(ShardLoads, APingReportsWhatThePodHoldsAndNothingElse) {
  ShardLoads loads;
  const auto table = tableOf({0, 0, 0, 1, 1, sharding::kNoPod});
  recordPings(loads, table, kPods,
              {answered({1, 2, 3}, {{1, 0.5}, {3, 0.25}, {5, 9.0}}),  // 5 is not a's to report
               PingOutcome{PingOutcome::State::kFailed, {}, {}, false}});
  EXPECT_TRUE(loads.measured);
  EXPECT_EQ(loads.reported.count("p0/up0/i"), 1u);
  EXPECT_EQ(loads.load, (std::vector<double>{0.5, 0, 0.25, 0, 0, 0}));
  // A later answer: shard 1 is no longer listed, so it costs nothing now; shards no answer
  // covers keep their figure.
  loads.load[4] = 0.75;
  recordPings(loads, table, kPods, {answered({1, 2}, {{2, 0.125}})});
  EXPECT_EQ(loads.load, (std::vector<double>{0, 0.125, 0.25, 0, 0.75, 0}));
}

TEST(ShardLoads, APodThatReportsNoLoadChangesNothingAndHoldsTheLoadPlannerBack) {
  ShardLoads loads;
  const auto table = tableOf({0, 1});
  const std::vector<sharding::RegisteredPod> pods(kPods.begin(), kPods.begin() + 2);
  recordPings(loads, table, pods, {answered({1}, {{1, 0.5}}), answered({2}, {{2, 0.25}})});
  EXPECT_EQ(loadKnowledge(pods, loads), LoadKnowledge::kComplete);
  // Pod p1 restarted with a sidecar that predates load reports (a new incarnation).
  auto restarted = pods;
  restarted[1].incarnation = "j";
  recordPings(loads, table, restarted,
              {answered({1}, {{1, 0.5}}), {PingOutcome::State::kAnswered, {2}, {}, false}});
  EXPECT_EQ(loads.load, (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(loadKnowledge(restarted, loads), LoadKnowledge::kSilentPods);
  EXPECT_EQ(loads.reported.size(), 1u);  // the old incarnation is forgotten
  sharding::ShardMap map;
  map.spec.shards = 2;
  map.spec.balance = sharding::Balance::kLoad;
  map.status.pods = restarted;
  EXPECT_FALSE(balancesByLoad(map, table, loads));
}

TEST(ShardLoads, APodNotHeardFromSinceTheTermBeganIsWaitedFor) {
  ShardLoads loads;
  const auto table = tableOf({0, 1});
  const std::vector<sharding::RegisteredPod> pods(kPods.begin(), kPods.begin() + 2);
  // p1's ping failed: its shards' figures are unknown, not zero.
  recordPings(loads, table, pods,
              {answered({1}, {{1, 0.5}}), {PingOutcome::State::kFailed, {}, {}, false}});
  EXPECT_EQ(loadKnowledge(pods, loads), LoadKnowledge::kWaiting);
  recordPings(loads, table, pods, {answered({1}, {{1, 0.5}}), answered({2}, {})});
  EXPECT_EQ(loadKnowledge(pods, loads), LoadKnowledge::kComplete);
}

TEST(ShardLoads, AShardJustMovedKeepsItsFigureUntilItsNewOwnerReportsIt) {
  ShardLoads loads;
  recordPings(loads, tableOf({0, 0}), kPods, {answered({1, 2}, {{1, 0.75}})});
  recordMoves(loads, 2, {Move{1, 0, 1}}, kT0);
  const auto after = tableOf({1, 0});
  // Its new owner has not ended a turn of it yet: the figure stays, once.
  recordPings(loads, after, kPods, {answered({2}, {}), answered({1}, {})});
  EXPECT_EQ(loads.load[0], 0.75);
  recordPings(loads, after, kPods, {answered({2}, {}), answered({1}, {})});
  EXPECT_EQ(loads.load[0], 0);
}

TEST(ShardLoads, APodThatClaimsAnotherPodsShardsDoesNotSpeakForThem) {
  ShardLoads loads;
  const auto table = tableOf({0, 1, sharding::kNoPod});
  // b claims shard 1 (a's) and shard 3 (no one's) as well.
  recordPings(loads, table, kPods,
              {answered({1}, {{1, 0.5}}), answered({1, 2, 3}, {{1, 100.0}, {2, 0.25}, {3, 7.0}})});
  EXPECT_EQ(loads.load, (std::vector<double>{0.5, 0.25, 0}));
}

TEST(ShardLoads, NoAnswerMeansNotMeasured) {
  ShardLoads loads;
  recordPings(loads, tableOf({0, 0, 0, 0}), kPods,
              {PingOutcome{PingOutcome::State::kFailed, {}, {}, false}});
  EXPECT_FALSE(loads.measured);
  EXPECT_FALSE(loadStatusDue(loads, SteadyTime{}, true));
}

TEST(ShardLoads, MovedShardsWaitOutTheCooldown) {
  ShardLoads loads;
  recordPings(loads, tableOf({0, 0, 0}), kPods, {answered({1, 2, 3}, {{1, 1.0}})});
  recordMoves(loads, 3, {Move{2, 0, 1}}, kT0);
  sharding::PlanningInput base;
  base.shardCount = 3;
  auto in = loadPlanningInput(base, loads, 0.2, kT0 + 1s, 20s);
  EXPECT_EQ(in.tolerance, 0.2);
  EXPECT_EQ(in.minMeanLoad, kMinLoadToBalance);
  EXPECT_EQ(in.cooldownRounds, 6);  // two minutes of 20 s rounds
  EXPECT_EQ(in.load, loads.load);
  ASSERT_EQ(in.roundsSinceMoved.size(), 3u);
  EXPECT_EQ(in.roundsSinceMoved[1], 0);
  EXPECT_GT(in.roundsSinceMoved[0], in.cooldownRounds);  // never moved
  // The cooldown counts intervals of time, not rounds: extra rounds (registrations) in between
  // do not shorten it.
  for (int i = 0; i < 5; ++i) recordPings(loads, tableOf({0, 1, 0}), kPods, {});
  EXPECT_EQ(loadPlanningInput(base, loads, 0.2, kT0 + 41s, 20s).roundsSinceMoved[1], 2);
}

TEST(ShardLoads, BalancesByLoadOnlyWhenAskedMeasuredAndFullyAssigned) {
  sharding::ShardMap map;
  map.spec.shards = 2;
  map.spec.balance = sharding::Balance::kLoad;
  sharding::ShardTable table(2);
  table.assign(1, 0, 1);
  table.assign(2, 0, 1);
  ShardLoads loads;
  map.status.pods = {kPods[0]};
  EXPECT_FALSE(balancesByLoad(map, table, loads));  // nothing reported yet
  recordPings(loads, table, kPods, {answered({1, 2}, {})});
  EXPECT_TRUE(balancesByLoad(map, table, loads));
  table.unassign(2);
  EXPECT_FALSE(balancesByLoad(map, table, loads));  // the count planner places it first
  table.assign(2, 0, 1);
  map.spec.balance = sharding::Balance::kCount;
  EXPECT_FALSE(balancesByLoad(map, table, loads));
}

TEST(ShardLoads, StatusShowsEachPodsLoadTheSpreadAndTheHottestShards) {
  sharding::ShardTable table(4);
  table.assign(1, 0, 1);
  table.assign(2, 0, 1);
  table.assign(3, 1, 1);
  table.assign(4, 1, 1);
  ShardLoads loads;
  recordPings(loads, table, kPods,
              {answered({1, 2}, {{1, 0.6}, {2, 0.2}}), answered({3, 4}, {{3, 0.123456}})});
  auto status = twoPods();
  writeLoadStatus(status, table, loads);
  EXPECT_EQ(status.pods[0].load, 0.8);
  EXPECT_EQ(status.pods[1].load, 0.123);  // 3 significant digits
  ASSERT_TRUE(status.load.has_value());
  // mean (0.8 + 0.123456) / 2 = 0.461728; peak 0.8; the hottest shard 0.6.
  EXPECT_EQ(status.load->peakToMean, 1.73);
  EXPECT_EQ(status.load->bound, 1.30);
  EXPECT_EQ(status.load->total, 0.923);
  ASSERT_EQ(status.load->hottest.size(), 3u);  // shard 4 carries none
  EXPECT_EQ(status.load->hottest[0], (sharding::ShardLoadReport{1, "a", 0.6}));
  EXPECT_EQ(status.load->hottest[1], (sharding::ShardLoadReport{2, "a", 0.2}));
  EXPECT_EQ(status.load->hottest[2], (sharding::ShardLoadReport{3, "b", 0.123}));
}

TEST(ShardLoads, TheHottestListIsBounded) {
  const std::int32_t n = 50;
  sharding::ShardTable table(n);
  Shards held;
  std::vector<std::pair<ShardId, double>> reported;
  for (ShardId s = 1; s <= n; ++s) {
    table.assign(s, 0, 1);
    held.push_back(s);
    reported.emplace_back(s, s * 0.01);
  }
  ShardLoads loads;
  recordPings(loads, table, kPods, {answered(held, reported)});
  auto status = twoPods();
  writeLoadStatus(status, table, loads);
  ASSERT_EQ(status.load->hottest.size(), sharding::kHottestShards);
  EXPECT_EQ(status.load->hottest.front().shard, 50);
  EXPECT_EQ(status.load->hottest.back().shard, 41);
}

TEST(ShardLoads, StatusIsRefreshedWithOtherWritesOrAfterTheInterval) {
  ShardLoads loads;
  recordPings(loads, tableOf({0}), kPods, {answered({1}, {{1, 1.0}})});
  const SteadyTime t0 = kT0;
  EXPECT_TRUE(loadStatusDue(loads, t0, false));  // never written
  loads.statusWritten = t0;
  EXPECT_FALSE(loadStatusDue(loads, t0 + kLoadStatusInterval - 1s, false));
  EXPECT_TRUE(loadStatusDue(loads, t0 + 1s, true));
  EXPECT_TRUE(loadStatusDue(loads, t0 + kLoadStatusInterval, false));
  loads.statusDropped = t0;  // the CRD dropped it: not again until the retry
  EXPECT_FALSE(loadStatusDue(loads, t0 + kLoadStatusInterval, true));
  EXPECT_TRUE(loadStatusDue(loads, t0 + kLoadStatusRetry, false));
}

TEST(ShardLoads, OnlyAMaterialChangeIsWorthAWriteOfItsOwn) {
  auto before = twoPods();
  before.pods[0].load = 1.0;
  before.pods[1].load = 1.0;
  before.load = sharding::LoadStatus{1.0, 1.0, 2.0, {}};
  auto after = before;
  after.pods[0].load = 1.05;  // within a tenth of the mean pod load
  after.load->peakToMean = 1.03;
  EXPECT_FALSE(loadMateriallyChanged(before, after, std::nullopt));
  // ... unless it crosses the tolerance, which the Balanced condition reads.
  EXPECT_TRUE(loadMateriallyChanged(before, after, 0.02));
  after.pods[0].load = 1.2;
  EXPECT_TRUE(loadMateriallyChanged(before, after, std::nullopt));
  after = before;
  after.load->peakToMean = 1.05;
  EXPECT_TRUE(loadMateriallyChanged(before, after, std::nullopt));
  EXPECT_TRUE(loadMateriallyChanged(twoPods(), before, std::nullopt));  // the first figures
}

TEST(ShardLoads, FiguresTooSmallToShowAreZeroNotNaN) {
  ShardLoads loads;
  const auto table = tableOf({0, 1});
  recordPings(loads, table, kPods,
              {answered({1}, {{1, std::numeric_limits<double>::denorm_min()}}),
               answered({2}, {{2, 0.5}})});
  auto status = twoPods();
  writeLoadStatus(status, table, loads);
  EXPECT_EQ(status.pods[0].load, 0.0);
  ASSERT_EQ(status.load->hottest.size(), 1u);  // the subnormal shard is not among them
  EXPECT_EQ(status.load->hottest[0].shard, 2);
  EXPECT_EQ(status, status);  // nothing NaN, which would never compare equal
}

TEST(ShardLoads, BalancedReadsTheLoadInLoadMode) {
  auto status = twoPods();
  ConditionFacts facts;
  facts.loadTolerance = 0.1;
  updateConditions(status, facts);
  const auto* balanced = sharding::findCondition(status.conditions, "Balanced");
  ASSERT_NE(balanced, nullptr);
  EXPECT_EQ(balanced->status, "Unknown");
  EXPECT_EQ(balanced->reason, "LoadUnknown");

  status.load = sharding::LoadStatus{1.5, 1.2, 2, {}};
  updateConditions(status, facts);
  balanced = sharding::findCondition(status.conditions, "Balanced");
  EXPECT_EQ(balanced->status, "False");
  EXPECT_EQ(balanced->reason, "LoadUnbalanced");
  EXPECT_NE(balanced->message.find("1.5 x the mean"), std::string::npos) << balanced->message;

  status.load->peakToMean = 1.205;  // within the hottest shard's bound, with rounding's slack
  updateConditions(status, facts);
  EXPECT_EQ(sharding::findCondition(status.conditions, "Balanced")->reason, "LoadBalanced");

  // Count mode ignores the load: 0 and 0 shards are within one.
  status.load->peakToMean = 3;
  updateConditions(status, ConditionFacts{});
  EXPECT_EQ(sharding::findCondition(status.conditions, "Balanced")->reason, "Balanced");
}

}  // namespace
}  // namespace kshard::manager
