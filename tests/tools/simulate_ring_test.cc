#include "tools/simulate_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/random.h"
#include "tests/tools/simulate_test_cluster.h"
#include "tools/simulate_run.h"

namespace kshard::tools {
namespace {

using std::chrono::seconds;

TestCluster::Factory ring(std::int32_t virtualNodes,
                          RingManager::UpdatePath path = RingManager::UpdatePath::kAuto) {
  return [=](Scheduler& s, OwnershipLedger& l, const SimulatedDeployment& d) {
    auto manager = std::make_unique<RingManager>(s, l, d, virtualNodes);
    manager->setUpdatePath(path);
    return manager;
  };
}

// The owner of `shard` by the definition, from scratch: the pod of the first point at or after
// the shard's hash, wrapping around to the first point.
SimPod expectedOwner(sharding::ShardId shard,
                     const std::vector<std::pair<std::uint64_t, SimPod>>& sortedPoints) {
  if (sortedPoints.empty()) return kNoSimPod;
  const std::uint64_t h = ringHash(std::to_string(shard));
  for (const auto& [point, pod] : sortedPoints) {
    if (point >= h) return pod;
  }
  return sortedPoints.front().second;
}

std::vector<std::pair<std::uint64_t, SimPod>> pointsOf(const TestCluster& c,
                                                       const std::vector<SimPod>& pods,
                                                       std::int32_t virtualNodes) {
  std::vector<std::pair<std::uint64_t, SimPod>> points;
  for (SimPod p : pods) {
    for (std::int32_t i = 0; i < virtualNodes; ++i) {
      points.emplace_back(ringHash(c.deployment.pod(p).address + "#" + std::to_string(i)), p);
    }
  }
  std::sort(points.begin(), points.end());
  return points;
}

TEST(SimulateRingTest, Fnv1aMatchesItsPublishedTestVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(ringHash("a"), fmix64(fnv1a64("a")));
}

TEST(SimulateRingTest, FinalizerSpreadsKeysThatDifferInTheLastByte) {
  // FNV-1a of "...#1" and "...#2" differ by a small multiple of its prime (2^40 + 0x1b3), which
  // leaves the top byte nearly equal: the points would cluster. After fmix64 they do not.
  int fnvTopByteEqual = 0;
  int ringTopByteEqual = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string a = "10.0.0." + std::to_string(i) + ":7101#1";
    const std::string b = "10.0.0." + std::to_string(i) + ":7101#2";
    fnvTopByteEqual += (fnv1a64(a) >> 56) == (fnv1a64(b) >> 56);
    ringTopByteEqual += (ringHash(a) >> 56) == (ringHash(b) >> 56);
  }
  EXPECT_GT(fnvTopByteEqual, 900);
  EXPECT_LT(ringTopByteEqual, 20);
  EXPECT_EQ(fmix64(0), 0u);
}

TEST(SimulateRingTest, RingPointsKeepOrderAndWrapAround) {
  RingPoints points;
  std::set<std::uint64_t> reference;
  SeededRandom random(5);
  // Enough points to split chunks many times, then erase most of them again.
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t h = random.next() % 100000;
    EXPECT_EQ(points.insert({h, static_cast<SimPod>(h % 7)}), reference.insert(h).second);
  }
  for (int i = 0; i < 4000; ++i) {
    const std::uint64_t h = random.next() % 100000;
    points.erase(h);
    reference.erase(h);
  }
  ASSERT_EQ(points.size(), reference.size());
  std::vector<std::uint64_t> listed;
  for (const RingPoints::Point& p : points.points()) {
    listed.push_back(p.hash);
    EXPECT_EQ(points.at(p.hash), static_cast<SimPod>(p.hash % 7));
  }
  EXPECT_EQ(listed, std::vector<std::uint64_t>(reference.begin(), reference.end()));
  for (std::uint64_t h = 0; h < 100000; h += 37) {
    auto above = reference.upper_bound(h);
    const std::uint64_t after = above == reference.end() ? *reference.begin() : *above;
    auto below = reference.lower_bound(h);
    const std::uint64_t before = below == reference.begin() ? *reference.rbegin() : *--below;
    EXPECT_EQ(points.after(h).hash, after) << h;
    EXPECT_EQ(points.before(h).hash, before) << h;
  }
  EXPECT_EQ(points.at(100001), kNoSimPod);
}

TEST(SimulateRingTest, TwoPodsWithOnePointEachSplitTheRingAtTheirPoints) {
  TestCluster c(50, ring(1));
  c.start(2);
  const std::uint64_t p0 = ringHash(c.deployment.pod(0).address + "#0");
  const std::uint64_t p1 = ringHash(c.deployment.pod(1).address + "#0");
  const SimPod low = p0 < p1 ? 0 : 1;
  const SimPod high = 1 - low;
  std::int32_t onHigh = 0;
  for (sharding::ShardId s = 1; s <= 50; ++s) {
    const std::uint64_t h = ringHash(std::to_string(s));
    // Up to the lower point and past the higher one: the lower point's pod; between: the other.
    const SimPod expected = h > std::min(p0, p1) && h <= std::max(p0, p1) ? high : low;
    EXPECT_EQ(c.ledger.owner(s), expected) << "shard " << s;
    onHigh += expected == high;
  }
  EXPECT_EQ(c.ledger.placements(), 0) << "counters start after the initial placement";
  // The higher pod leaves: its shards, and only those, go to the other pod.
  c.deployment.scaleTo(1);
  c.runUntilSettled();
  EXPECT_EQ(c.ledger.countOf(0), 50);
  EXPECT_EQ(c.ledger.moves(), high == 1 ? onHigh : 50 - onHigh);
  EXPECT_EQ(c.ledger.lastChange(), seconds(5)) << "when pod 1 unregistered, after its drain";
}

// Every shard's owner in the ledger is its owner by definition, over the pods in the ring.
void expectOwnersByDefinition(const TestCluster& c, std::int32_t virtualNodes) {
  std::vector<SimPod> inRing;
  for (std::size_t p = 0; p < c.deployment.pods().size(); ++p) {
    const PodPhase phase = c.deployment.pods()[p].phase;
    if (phase == PodPhase::kReady || phase == PodPhase::kTerminating) {
      inRing.push_back(static_cast<SimPod>(p));
    }
  }
  const auto points = pointsOf(c, inRing, virtualNodes);
  for (sharding::ShardId s = 1; s <= c.ledger.shardCount(); ++s) {
    ASSERT_EQ(c.ledger.owner(s), expectedOwner(s, points)) << "shard " << s;
  }
}

std::int64_t runEveryScenarioChecked(RingManager::UpdatePath path) {
  constexpr std::int32_t kPoints = 10;
  TestCluster c(500, ring(kPoints, path));
  c.start(4);
  expectOwnersByDefinition(c, kPoints);
  c.deployment.scaleTo(9);
  c.runUntilSettled();
  expectOwnersByDefinition(c, kPoints);
  c.deployment.rollingUpdate("2.0.0");
  c.runUntilSettled();
  expectOwnersByDefinition(c, kPoints);
  SeededRandom random(4);
  c.deployment.crash(3, random);
  c.runUntilSettled();
  expectOwnersByDefinition(c, kPoints);
  c.deployment.scaleTo(2);
  c.runUntilSettled();
  expectOwnersByDefinition(c, kPoints);
  return c.ledger.moves();
}

TEST(SimulateRingTest, PointByPointAndRebuildFollowTheDefinition) {
  const std::int64_t pointByPoint = runEveryScenarioChecked(RingManager::UpdatePath::kPointByPoint);
  const std::int64_t rebuild = runEveryScenarioChecked(RingManager::UpdatePath::kRebuild);
  EXPECT_EQ(pointByPoint, rebuild);
  EXPECT_GT(pointByPoint, 0);
}

StatusOr<SimulationResult> simulateRing(Scenario scenario) {
  SimulationConfig config;
  config.shards = 3000;
  config.pods = 10;
  config.strategy = Strategy::kRing;
  config.scenario = scenario;
  return simulate(config);
}

TEST(SimulateRingTest, RollingUpdateGivesEveryShardToANewPodAndMovesSomeMoreThanOnce) {
  const StatusOr<SimulationResult> r = simulateRing(Scenario::kRollingUpdate);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Each shard moves at least once (its old pod is gone); shards handed to an old pod that
  // leaves later move again.
  EXPECT_GT(r->moves, 3000);
  EXPECT_GE(r->maxMovesOfOneShard, 2);
  EXPECT_GT(r->finalImbalance, 1) << "consistent hashing is not balanced";
}

TEST(SimulateRingTest, ScaleUpSettlesInOneTableUpdateWhenThePodsAreReady) {
  const StatusOr<SimulationResult> r = simulateRing(Scenario::kScaleUp);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rounds, 1);
  EXPECT_EQ(r->settleTime, seconds(10));
  EXPECT_EQ(r->maxMovesOfOneShard, 1) << "a shard moves only to a new pod";
  // About half of the shards go to the 10 new pods.
  EXPECT_GT(r->moves, 1200);
  EXPECT_LT(r->moves, 1800);
}

}  // namespace
}  // namespace kshard::tools
