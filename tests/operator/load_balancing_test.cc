// Component tests of spec.balance: load: the controller against stub pods whose ping answers
// report what their shards cost, on simulated time. The harness checks after every event that no
// shard is served by two pods (ControllerHarness::checkInvariant).
#include <gtest/gtest.h>

#include <chrono>

#include "operator/shard_loads.h"
#include "tests/operator/controller_harness.h"

namespace kshard::manager::testing {
namespace {

using namespace std::chrono_literals;

void useLoadBalance(ControllerHarness& h) {
  auto m = h.stored();
  m.spec.balance = sharding::Balance::kLoad;
  h.store.put(m);
  h.controller().observe(h.stored());
}

// Every shard of `pod` costs `load`, the others `rest`.
void setLoads(ControllerHarness& h, const std::string& pod, double load, double rest) {
  const auto m = h.stored();
  const auto table = h.storedTable();
  for (sharding::ShardId s = 1; s <= m.spec.shards; ++s) {
    const auto owner = table.owner(s);
    const bool hot = owner != sharding::kNoPod &&
                     m.status.pods[static_cast<std::size_t>(owner)].name == pod;
    h.pods.shardLoad[s] = hot ? load : rest;
  }
}

void startCounted(ControllerHarness& h, const std::vector<std::string>& names) {
  h.lead();
  for (const auto& n : names) {
    h.startPod(n);
    ASSERT_EQ(h.registerPod(n), 200) << n;
  }
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(LoadBalancing, MovesShardsOffTheBusiestPodUntilWithinTolerance) {
  ControllerHarness h(60);
  startCounted(h, {"a", "b", "c"});
  setLoads(h, "a", 3.0, 1.0);  // a: 60, b and c: 20; mean 33.3, peak-to-mean 1.8
  useLoadBalance(h);
  std::int64_t epochBefore = h.stored().status.epoch;
  h.store.afterEvent = [&] { h.checkInvariant(); };
  ASSERT_TRUE(h.runUntil(
      [&] {
        // The total (3 x 20 + 20 + 20) tells a figure of these loads from an earlier one.
        const auto m = h.stored();
        return m.status.load && m.status.load->total == 100 &&
               loadWithinTolerance(*m.status.load, m.spec.loadTolerance) &&
               h.conditionStatus("Balanced") == "True";
      },
      600s))
      << "the busiest pod did not come within the tolerance";
  const auto m = h.stored();
  EXPECT_LE(m.status.load->peakToMean, 1.1 * 1.005);
  EXPECT_GT(m.status.epoch, epochBefore);
  // Shards moved, so the counts are no longer even: a now holds fewer than b and c.
  auto counts = h.counts();
  EXPECT_LT(counts["a"], counts["b"]);
  EXPECT_LT(counts["a"], counts["c"]);
  for (const auto& p : m.status.pods) ASSERT_TRUE(p.load.has_value()) << p.name;
  EXPECT_EQ(m.status.load->hottest.front().load, 3.0);
  EXPECT_EQ(h.stored().status.unassignedCount, 0);

  // Once within the tolerance it stays put: no more moves.
  const double moves = h.moves();
  h.run(200s);
  EXPECT_EQ(h.moves(), moves);
}

TEST(LoadBalancing, CountModeShowsTheLoadButDoesNotMoveForIt) {
  ControllerHarness h(60);
  startCounted(h, {"a", "b", "c"});
  setLoads(h, "a", 3.0, 1.0);
  const double moves = h.moves();
  ASSERT_TRUE(h.runUntil(
      [&] { return h.stored().status.load && h.stored().status.load->total == 100; }, 120s))
      << "status.load was not written";
  h.run(300s);
  EXPECT_EQ(h.moves(), moves);
  EXPECT_EQ(h.stored().status.load->peakToMean, 1.8);
  EXPECT_EQ(h.conditionStatus("Balanced"), "True");  // by count
}

// Writes of status.load alone over 600 s while the loads of a's shards grow by `step` every 20 s
// (nothing else changes).
int loadWritesWith(double step) {
  ControllerHarness h(30);
  startCounted(h, {"a", "b", "c"});
  setLoads(h, "a", 1.0, 1.0);
  h.run(60s);
  const int writes = h.store.writes;
  double noise = 0;
  h.store.afterEvent = [&] { h.checkInvariant(); };
  for (int i = 0; i < 30; ++i) {
    noise += step;
    setLoads(h, "a", 1.0 + noise, 1.0);
    h.run(20s);
  }
  return h.store.writes - writes;
}

TEST(LoadBalancing, TheLoadAloneIsWrittenAtMostEveryIntervalAndOnlyWhenItChanged) {
  // a's load grows by 2 (of a mean near 10) every 20 s: worth a write each time, but one per
  // 30 s at most.
  const int changing = loadWritesWith(0.2);
  EXPECT_LE(changing, 600 / 30 + 1);
  EXPECT_GE(changing, 600 / 60);
  // Noise of 0.05 % of the mean per 20 s: peak-to-mean moves by under 0.05 in ten minutes.
  EXPECT_LE(loadWritesWith(0.0005), 1);
}

TEST(LoadBalancing, AHotShardThatCannotBeSplitIsLeftWhereItIs) {
  ControllerHarness h(30);
  startCounted(h, {"a", "b", "c"});
  // One shard costs more than everything else together: no placement does better than its
  // bound, and moving it would only move the problem.
  for (sharding::ShardId s = 1; s <= 30; ++s) h.pods.shardLoad[s] = s == 7 ? 100.0 : 0.1;
  useLoadBalance(h);
  ASSERT_TRUE(h.runUntil(
      [&] { return h.stored().status.load && h.stored().status.load->total > 100; }, 120s));
  const auto owner = h.storedTable().owner(7);
  h.run(400s);
  EXPECT_EQ(h.storedTable().owner(7), owner);
  const auto load = *h.stored().status.load;
  EXPECT_GT(load.bound, 1.1);
  EXPECT_TRUE(loadWithinTolerance(load, 0.1)) << load.peakToMean << " vs bound " << load.bound;
}

// Runs until the map is balanced by load with the loads setLoads(h, "a", 3.0, 1.0) gives.
void balanceByLoad(ControllerHarness& h) {
  setLoads(h, "a", 3.0, 1.0);
  useLoadBalance(h);
  ASSERT_TRUE(h.runUntil(
      [&] {
        const auto m = h.stored();
        return m.status.load && m.status.load->total == 100 &&
               loadWithinTolerance(*m.status.load, m.spec.loadTolerance);
      },
      600s));
}

TEST(LoadBalancing, ANewLeaderDoesNotUndoTheBalanceByCount) {
  ControllerHarness h(60);
  startCounted(h, {"a", "b", "c"});
  balanceByLoad(h);
  const auto counts = h.counts();
  ASSERT_LT(counts.at("a"), counts.at("b"));
  h.store.afterEvent = [&] { h.checkInvariant(); };
  h.addReplica("kshard-operator-1");
  h.loseLease(0);
  h.lead(1);
  // Its first rounds know no load yet: they place, they do not even out the counts.
  h.run(300s);
  EXPECT_EQ(h.counts(), counts);
  EXPECT_EQ(h.stored().status.manager->pod, "kshard-operator-1");
}

TEST(LoadBalancing, APodWhoseSidecarReportsNoLoadHoldsBalancingBack) {
  ControllerHarness h(60);
  startCounted(h, {"a", "b", "c"});
  for (sharding::ShardId s = 1; s <= 60; ++s) h.pods.shardLoad[s] = 1.0;
  setLoads(h, "a", 3.0, 1.0);
  h.pods.find("c")->reportsLoad = false;  // an older sidecar: it would look idle
  useLoadBalance(h);
  const double moves = h.moves();
  h.store.afterEvent = [&] { h.checkInvariant(); };
  h.run(600s);
  EXPECT_EQ(h.moves(), moves);
  for (const auto& [pod, n] : h.counts()) EXPECT_EQ(n, 20) << pod;
  EXPECT_EQ(h.events.count("LoadNotReported"), 1);

  // Meanwhile the map is balanced by count: a new pod still gets its share.
  h.startPod("d");
  ASSERT_EQ(h.registerPod("d"), 200);
  EXPECT_TRUE(h.runUntil([&] { return h.counts()["d"] == 15; }, 600s))
      << "d holds " << h.counts()["d"] << " shards";
}

TEST(LoadBalancing, ACrdThatDropsTheLoadStopsItsRefreshes) {
  ControllerHarness h(30);
  startCounted(h, {"a", "b", "c"});
  h.store.prune = [](sharding::ShardMapStatus& s) {
    s.load.reset();
    for (auto& p : s.pods) p.load.reset();
  };
  double noise = 0;
  const int writes = h.store.writes;
  for (int i = 0; i < 30; ++i) {
    noise += 0.5;
    setLoads(h, "a", 1.0 + noise, 1.0);
    h.run(20s);
  }
  EXPECT_LE(h.store.writes - writes, 1) << "the refresh kept writing what the API server drops";
  EXPECT_EQ(h.events.count("OutdatedCRD"), 1);
}

}  // namespace
}  // namespace kshard::manager::testing
