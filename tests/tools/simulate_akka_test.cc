#include "tools/simulate_akka.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/tools/simulate_test_cluster.h"

namespace kshard::tools {
namespace {

using std::chrono::seconds;
using Shards = std::vector<sharding::ShardId>;

TestCluster::Factory akka(AkkaParams params) {
  return [params](Scheduler& s, OwnershipLedger& l, const SimulatedDeployment& d) {
    return std::make_unique<AkkaManager>(s, l, d, params);
  };
}

AkkaParams classic(std::int32_t threshold = 1, std::int32_t maxSimultaneous = 3) {
  AkkaParams p;
  p.classic = true;
  p.rebalanceThreshold = threshold;
  p.maxSimultaneousRebalance = maxSimultaneous;
  return p;
}

AkkaParams current(std::int32_t absoluteLimit = 20, double relativeLimit = 0.1) {
  AkkaParams p;
  p.absoluteLimit = absoluteLimit;
  p.relativeLimit = relativeLimit;
  return p;
}

const AkkaManager& manager(const TestCluster& c) {
  return static_cast<const AkkaManager&>(*c.manager);
}

// `pods` regions hold the shards; one more joins at 10 s (right after the tick at 10 s).
void addRegionAfter(TestCluster& c, std::int32_t pods) {
  c.start(pods);
  c.deployment.scaleTo(pods + 1);
  c.scheduler.advance(seconds(10));
}

TEST(SimulateAkkaTest, StartAllocatesEachShardToTheRegionWithFewest) {
  TestCluster c(5, akka(classic()));
  c.start(2);
  EXPECT_EQ(c.owners(),
            (std::map<sharding::ShardId, SimPod>{{1, 0}, {2, 1}, {3, 0}, {4, 1}, {5, 0}}));
}

TEST(SimulateAkkaTest, ClassicWithThresholdOneHandsOffOneShardPerRound) {
  // 10 shards on one region; a second joins at 10 s. Rebalance ticks every 10 s.
  TestCluster c(10, akka(classic()));
  addRegionAfter(c, 1);
  // difference 10 > 1: n = min(10 - 1, 1, 3 - 0) = 1, the lowest shard id.
  EXPECT_EQ(manager(c).rebalance(), Shards{1});
  c.scheduler.advance(seconds(11));  // tick at 20 s, handoff done at 21 s
  EXPECT_EQ(c.counts({0, 1}), (std::vector<std::int32_t>{9, 1}));
  EXPECT_EQ(c.ledger.owner(1), 1);
  EXPECT_EQ(manager(c).rebalance(), Shards{2});
  c.runUntilSettled();
  EXPECT_EQ(c.counts({0, 1}), (std::vector<std::int32_t>{5, 5}));
  EXPECT_EQ(c.ledger.moves(), 5);
  EXPECT_EQ(c.ledger.rounds(), 5);
  EXPECT_EQ(c.ledger.lastChange(), seconds(61));
}

TEST(SimulateAkkaTest, ClassicHandsOffUpToThresholdShardsWithinMaxSimultaneous) {
  {
    TestCluster c(10, akka(classic(3, 3)));
    addRegionAfter(c, 1);
    // n = min(10 - 3, 3, 3 - 0) = 3.
    EXPECT_EQ(manager(c).rebalance(), (Shards{1, 2, 3}));
    // [7, 3]: difference 4 > 3 moves min(1, 3, 3) = 1; then [6, 4] is within the threshold.
    c.runUntilSettled();
    EXPECT_EQ(c.counts({0, 1}), (std::vector<std::int32_t>{6, 4}));
    EXPECT_EQ(c.ledger.moves(), 4);
  }
  {
    TestCluster c(10, akka(classic(3, 2)));
    addRegionAfter(c, 1);
    EXPECT_EQ(manager(c).rebalance(), (Shards{1, 2}));
  }
}

TEST(SimulateAkkaTest, CurrentHandsOffAtMostTheLimitOfTheOldestAllocatedShards) {
  // 100 shards on one region, a second joins: optimal 50; limit = min(floor(0.1 x 100), 20) = 10.
  TestCluster c(100, akka(current()));
  addRegionAfter(c, 1);
  EXPECT_EQ(manager(c).rebalance(), (Shards{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  c.runUntilSettled();
  EXPECT_EQ(c.counts({0, 1}), (std::vector<std::int32_t>{50, 50}));
  EXPECT_EQ(c.ledger.moves(), 50);
  EXPECT_EQ(c.ledger.rounds(), 5);
  EXPECT_EQ(c.ledger.lastChange(), seconds(61)) << "ticks at 20..60 s, each handoff 1 s";
}

TEST(SimulateAkkaTest, CurrentLimitIsTheSmallerOfAbsoluteAndRelative) {
  for (const auto& [params, expected] :
       {std::pair{current(5, 0.1), 5u}, std::pair{current(20, 0.03), 3u},
        std::pair{current(20, 0.001), 1u}}) {
    TestCluster c(100, akka(params));
    addRegionAfter(c, 1);
    EXPECT_EQ(manager(c).rebalance().size(), expected);
  }
}

TEST(SimulateAkkaTest, CurrentPhaseTwoEvensOutRegionsTwoBelowOptimal) {
  // 7 shards on 2 regions: [4, 3]. A third joins: optimal = ceil(7 / 3) = 3.
  TestCluster c(7, akka(current()));
  addRegionAfter(c, 2);
  // Phase 1: the region above optimal offers its oldest shard.
  EXPECT_EQ(manager(c).rebalance(), Shards{1});
  c.scheduler.advance(seconds(11));
  EXPECT_EQ(c.counts({0, 1, 2}), (std::vector<std::int32_t>{3, 3, 1}));
  // Phase 2: nobody above optimal, region 2 is 2 below it: one shard from the first region at
  // optimal (in suitability order: fewest shards, then registration).
  EXPECT_EQ(manager(c).rebalance(), Shards{3});
  c.runUntilSettled();
  EXPECT_EQ(c.counts({0, 1, 2}), (std::vector<std::int32_t>{2, 3, 2}));
  EXPECT_EQ(c.ledger.moves(), 2);
}

// Three pods of 1.0.0 with 5 shards each, rolling update with maxSurge 1, maxUnavailable 0: the
// first 2.0.0 pod (3) is ready at 10 s, pod 2 drains until 15 s and its shards go to pod 3.
// Then (at 16 s) pod 1's death is reported: who gets its 5 shards?
std::vector<std::int32_t> afterDeathDuringRollout(AkkaParams params, Shards* rebalance) {
  RollingUpdateParams rolling;
  rolling.maxSurge = {1, false};
  rolling.maxUnavailable = {0, false};
  TestCluster c(15, akka(params), {}, rolling);
  c.start(3);
  c.deployment.rollingUpdate("2.0.0");
  c.scheduler.advance(seconds(16));
  EXPECT_EQ(c.counts({0, 1, 3}), (std::vector<std::int32_t>{5, 5, 5}));
  c.manager->podDied(1);
  *rebalance = manager(c).rebalance();
  return c.counts({0, 3});
}

TEST(SimulateAkkaTest, CurrentAllocatesToTheNewestVersionAndWaitsForTheRollout) {
  Shards rebalance;
  EXPECT_EQ(afterDeathDuringRollout(current(), &rebalance), (std::vector<std::int32_t>{5, 10}));
  EXPECT_TRUE(rebalance.empty()) << "no rebalance while versions differ";
}

TEST(SimulateAkkaTest, ClassicAllocatesToTheFewestWhateverTheVersion) {
  Shards rebalance;
  // Ties go to the region registered first: 0, 3, 0, 3, 0.
  EXPECT_EQ(afterDeathDuringRollout(classic(), &rebalance), (std::vector<std::int32_t>{8, 7}));
  EXPECT_TRUE(rebalance.empty()) << "difference 1 is within the threshold";
}

TEST(SimulateAkkaTest, GracefulShutdownHandsOffEveryShardWhenTheDrainEnds) {
  TestCluster c(9, akka(current()));
  c.start(3);
  c.deployment.scaleTo(2);  // pod 2 leaves: terminating at 0 s, drained at 5 s
  c.scheduler.advance(seconds(4));
  EXPECT_EQ(c.ledger.countOf(2), 3);
  EXPECT_TRUE(manager(c).rebalance().empty()) << "a handoff is in progress";
  c.scheduler.advance(seconds(1));
  EXPECT_EQ(c.counts({0, 1, 2}), (std::vector<std::int32_t>{5, 4, 0}));
  EXPECT_EQ(c.ledger.moves(), 3);
}

TEST(SimulateAkkaTest, CurrentDoesNotRebalanceWhileAMemberIsUnreachable) {
  DeploymentTiming timing;
  timing.detect = seconds(100);
  TestCluster c(100, akka(current()), timing);
  addRegionAfter(c, 1);
  ASSERT_FALSE(manager(c).rebalance().empty());
  SeededRandom random(0);
  c.deployment.crash(1, random);
  EXPECT_TRUE(manager(c).rebalance().empty());
}

}  // namespace
}  // namespace kshard::tools
