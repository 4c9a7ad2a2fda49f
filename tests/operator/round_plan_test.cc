#include "operator/round_plan.h"

#include <gtest/gtest.h>

#include "base/random.h"
#include "sharding/shard_map_json.h"

namespace kshard::manager {
namespace {

using sharding::ShardTable;
using namespace std::chrono_literals;

// 10 shards: pod 0 owns 1-6, pod 1 owns 7-10 (all at epoch 3).
ShardTable twoPods() {
  ShardTable t(10);
  for (ShardId s = 1; s <= 6; ++s) t.assign(s, 0, 3);
  for (ShardId s = 7; s <= 10; ++s) t.assign(s, 1, 3);
  return t;
}

PingOutcome answered(Shards held) { return {PingOutcome::State::kAnswered, std::move(held), {}, false}; }
PingOutcome failedPing() { return {PingOutcome::State::kFailed, {}, {}, false}; }

TEST(PlanningInput, UnreachableTerminatingAndLeavingPodsCannotReceive) {
  sharding::ShardMap map;
  map.spec.shards = 10;
  map.spec.rebalanceRate = 0.5;
  map.status.pods = {{"a", "ua", "x:1", "1", 0, "", {}},
                     {"b", "ub", "x:2", "1", 0, "", {}},
                     {"c", "uc", "x:3", "1", 0, "", {}},
                     {"d", "ud", "x:4", "1", 0, "", {}}};
  auto in = planningInput(
      map, ShardTable(10),
      {{true, false, false}, {false, false, false}, {true, true, false}, {true, false, true}},
      true);
  EXPECT_EQ(in.shardCount, 10);
  EXPECT_TRUE(in.immediate);
  EXPECT_DOUBLE_EQ(in.rebalanceRate, 0.5);
  ASSERT_EQ(in.pods.size(), 4u);
  EXPECT_TRUE(in.pods[0].ready && !in.pods[0].terminating);
  EXPECT_FALSE(in.pods[1].ready);
  EXPECT_TRUE(in.pods[2].terminating);
  EXPECT_TRUE(in.pods[3].terminating);
  // The planner then places everything on the one pod that can receive.
  SeededRandom r(1);
  auto moves = sharding::decide(in, r);
  ASSERT_TRUE(moves.ok());
  EXPECT_EQ(moves->size(), 10u);
  for (const auto& m : *moves) EXPECT_EQ(m.to, 0);
}

TEST(PodsToPing, BothEndsOfEveryMoveOrEveryPod) {
  std::vector<Move> moves{{1, 0, 2}, {2, std::nullopt, 3}};
  EXPECT_EQ(podsToPing(moves, 5, false), (std::vector<PodIndex>{0, 2, 3}));
  EXPECT_EQ(podsToPing(moves, 5, true), (std::vector<PodIndex>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(podsToPing({}, 5, false).empty());
}

TEST(PlanRound, MovesTouchingAPodThatFailedThePingAreDropped) {
  auto table = twoPods();
  table.unassign(5);
  std::vector<Move> moves{{1, 0, 2}, {5, std::nullopt, 1}, {2, 0, 1}};
  std::vector<PingOutcome> pings{answered({1, 2, 3, 4, 6}), answered({7, 8, 9, 10}), failedPing()};
  auto plan = planRound(table, moves, pings, false);
  ASSERT_EQ(plan.moves.size(), 2u);
  EXPECT_EQ(plan.moves[0].shard, 5);
  EXPECT_EQ(plan.moves[1].shard, 2);
  ASSERT_EQ(plan.dropped.size(), 1u);
  EXPECT_EQ(plan.dropped[0].shard, 1);
  // Only the source of the surviving move is unassigned; nothing from the failed pod.
  EXPECT_EQ(plan.unassign, (ShardsByPod{{0, {2}}}));
  EXPECT_TRUE(plan.strays.empty());
  EXPECT_TRUE(plan.resend.empty());
}

TEST(PlanRound, StraysAreUnassignedAndLostShardsResent) {
  auto table = twoPods();
  // Pod 0 lost shard 4 (an assign that never arrived) and holds 8, which pod 1 owns.
  std::vector<PingOutcome> pings{answered({1, 2, 3, 5, 6, 8}), answered({7, 8, 9, 10})};
  auto plan = planRound(table, {}, pings, false);
  EXPECT_EQ(plan.strays, (ShardsByPod{{0, {8}}}));
  EXPECT_EQ(plan.unassign, (ShardsByPod{{0, {8}}}));
  EXPECT_EQ(plan.resend, (ShardsByPod{{0, {4}}}));
}

TEST(PlanRound, ResendAllResendsEveryShardOfEveryAnsweringPod) {
  auto table = twoPods();
  std::vector<PingOutcome> pings{answered({1, 2, 3, 4, 5, 6}), failedPing()};
  auto plan = planRound(table, {}, pings, true);
  EXPECT_EQ(plan.resend, (ShardsByPod{{0, {1, 2, 3, 4, 5, 6}}}));
}

TEST(PlanRound, PodsNotPingedAreNotReconciled) {
  auto table = twoPods();
  std::vector<PingOutcome> pings{PingOutcome{}, PingOutcome{}};
  auto plan = planRound(table, {}, pings, false);
  EXPECT_TRUE(plan.unassign.empty());
  EXPECT_TRUE(plan.resend.empty());
}

TEST(CommitRound, AppliedMovesLandAtTheNextEpoch) {
  auto table = twoPods();
  table.unassign(5);
  std::vector<PingOutcome> pings{answered({1, 2, 3, 4, 6}), answered({7, 8, 9, 10})};
  auto plan = planRound(table, {{5, std::nullopt, 1}, {1, 0, 1}}, pings, false);
  auto c = commitRound(table, 3, plan, {});
  EXPECT_TRUE(c.persist);
  EXPECT_EQ(c.epoch, 4);
  EXPECT_EQ(c.applied.size(), 2u);
  EXPECT_EQ(c.table.owner(5), 1);
  EXPECT_EQ(c.table.epoch(5), 4);
  EXPECT_EQ(c.table.owner(1), 1);
  EXPECT_EQ(c.table.epoch(1), 4);
  EXPECT_EQ(c.table.epoch(7), 3);  // untouched groups keep their epoch
  EXPECT_EQ(c.assign, (ShardsByPod{{1, {1, 5}}}));
}

TEST(CommitRound, MovesOutOfAPodWhoseUnassignFailedAreAbandonedAndGoBackToIt) {
  auto table = twoPods();
  std::vector<PingOutcome> pings{answered({1, 2, 3, 4, 5, 6}), answered({7, 8, 9, 10})};
  auto plan = planRound(table, {{1, 0, 1}, {2, 0, 1}}, pings, false);
  auto c = commitRound(table, 3, plan, {0});
  EXPECT_TRUE(c.applied.empty());
  EXPECT_EQ(c.abandoned.size(), 2u);
  EXPECT_EQ(c.table.owner(1), 0);
  EXPECT_EQ(c.table.owner(2), 0);
  // Epoch rule 3: the unassign went out at epoch 4; the round still persists epoch 4.
  EXPECT_TRUE(c.persist);
  EXPECT_EQ(c.epoch, 4);
  EXPECT_EQ(c.assign, (ShardsByPod{{0, {1, 2}}}));
}

TEST(CommitRound, NothingToDoPersistsNothing) {
  auto table = twoPods();
  std::vector<PingOutcome> pings{answered({1, 2, 3, 4, 5, 6}), answered({7, 8, 9, 10})};
  auto c = commitRound(table, 3, planRound(table, {}, pings, false), {});
  EXPECT_FALSE(c.persist);
  EXPECT_EQ(c.epoch, 3);
  EXPECT_TRUE(c.assign.empty());
  EXPECT_EQ(c.table, table);
}

TEST(CommitRound, MustPersistBumpsTheEpochWithoutMoves) {
  auto table = twoPods();
  std::vector<PingOutcome> pings{answered({1, 2, 3, 4, 5}), answered({7, 8, 9, 10})};
  auto c = commitRound(table, 3, planRound(table, {}, pings, false), {}, true);
  EXPECT_TRUE(c.persist);
  EXPECT_EQ(c.epoch, 4);
  // The re-send of the lost shard carries the new epoch.
  EXPECT_EQ(c.assign, (ShardsByPod{{0, {6}}}));
}

TEST(BalancedWithinOne, ComparesExtremes) {
  EXPECT_TRUE(balancedWithinOne({}));
  EXPECT_TRUE(balancedWithinOne({5, 6, 5}));
  EXPECT_FALSE(balancedWithinOne({5, 7, 6}));
}

// DESIGN.md: 10,000 shards over 1,000 pods must stay well under etcd's object limit. After an
// initial placement and a long balancing history (many epochs), the status is still small. (Each
// pod's sidecar incarnation, 16 hex digits, adds about 33 bytes a pod, 32 KiB in all.)
TEST(StatusSize, TenThousandShardsOverAThousandPodsStaysUnder320KiB) {
  constexpr std::int32_t kShards = 10000;
  constexpr int kPods = 1000;
  sharding::ShardMap map;
  map.spec.shards = kShards;
  map.spec.rebalanceRate = 0.02;
  for (int p = 0; p < kPods; ++p) {
    map.status.pods.push_back(
        {"counter-7d9f8c6b5-" + std::to_string(100000 + p),
         "0b4f1c2e-8a7d-4e61-9b3a-" + std::to_string(100000000000LL + p),
         "10.244." + std::to_string(p / 250) + "." + std::to_string(p % 250) + ":7101", "2.14.3", 0,
         "5f0c9a7e3b1d4c2a", {}});
  }
  ShardTable table(kShards);
  SeededRandom random(3);
  std::int64_t epoch = 0;
  // The first pods register one by one, each followed by rounds, as in a scale-up.
  for (int round = 0; round < 200; ++round) {
    std::vector<PodRuntime> rt(static_cast<std::size_t>(kPods));
    auto moves = sharding::decide(planningInput(map, table, rt, round == 0), random);
    ASSERT_TRUE(moves.ok());
    if (moves->empty()) break;
    ++epoch;
    for (const auto& m : *moves) table.assign(m.shard, m.to, epoch);
  }
  sharding::writeShardTable(table, map.status);
  map.status.epoch = epoch;
  const std::size_t bytes = sharding::toJson(map.status).dump().size();
  EXPECT_LT(bytes, 320u * 1024u) << "status is " << bytes << " bytes";
  EXPECT_EQ(map.status.unassignedCount, 0);
  RecordProperty("status_bytes", static_cast<int>(bytes));
}

// The same map after 300 pod replacements (a pod dies, its shards are placed on the others at a
// new epoch, a new pod registers and periodic rounds balance it): shards of one pod now sit at
// several epochs, so there are more (pod, epoch) groups. Still far below etcd's 1.5 MiB.
TEST(StatusSize, AfterThreeHundredPodReplacementsStaysUnderOneMiB) {
  constexpr std::int32_t kShards = 10000;
  constexpr int kPods = 1000;
  sharding::ShardMap map;
  map.spec.shards = kShards;
  auto podNamed = [](int n) {
    return sharding::RegisteredPod{
        "counter-7d9f8c6b5-" + std::to_string(100000 + n),
        "0b4f1c2e-8a7d-4e61-9b3a-" + std::to_string(100000000000LL + n),
        "10.244." + std::to_string(n / 250 % 256) + "." + std::to_string(n % 250) + ":7101",
        "2.14.3",
        0,
        "5f0c9a7e3b1d4c2a",
        std::nullopt};
  };
  for (int p = 0; p < kPods; ++p) map.status.pods.push_back(podNamed(p));
  ShardTable table(kShards);
  SeededRandom random(5);
  std::int64_t epoch = 0;
  auto round = [&](bool immediate) {
    std::vector<PodRuntime> rt(map.status.pods.size());
    auto moves = sharding::decide(planningInput(map, table, rt, immediate), random);
    ASSERT_TRUE(moves.ok());
    if (moves->empty()) return;
    ++epoch;
    for (const auto& m : *moves) table.assign(m.shard, m.to, epoch);
  };
  round(true);
  for (int i = 0; i < 300; ++i) {
    const auto victim = static_cast<PodIndex>(random.uniform(map.status.pods.size()));
    table.removePod(victim);
    map.status.pods.erase(map.status.pods.begin() + victim);
    round(true);
    map.status.pods.push_back(podNamed(kPods + i));
    round(false);
    round(false);
  }
  sharding::writeShardTable(table, map.status);
  map.status.epoch = epoch;
  const std::size_t bytes = sharding::toJson(map.status).dump().size();
  EXPECT_LT(bytes, 1024u * 1024u) << "status is " << bytes << " bytes";
  RecordProperty("status_bytes", static_cast<int>(bytes));
  RecordProperty("assignment_groups", static_cast<int>(map.status.assignments.size()));
}

TEST(ReadPing, OnlyTheRegisteredProcessAnswers) {
  const sharding::RegisteredPod pod{"a", "ua", "x:1", "1", 0, "inc-1", {}};
  protocol::PingResponse r{"a", "ua", "inc-1", 3, "1-2,5", {}};
  PingOutcome out;
  EXPECT_EQ(readPing(pod, r, 10, out), "");
  EXPECT_EQ(out.state, PingOutcome::State::kAnswered);
  EXPECT_EQ(out.held, (Shards{1, 2, 5}));

  for (auto wrong : {protocol::PingResponse{"b", "ua", "inc-1", 3, "1", {}},
                     protocol::PingResponse{"a", "ub", "inc-1", 3, "1", {}},
                     protocol::PingResponse{"a", "ua", "inc-2", 3, "1", {}}}) {
    PingOutcome o;
    EXPECT_NE(readPing(pod, wrong, 10, o).find("answered by pod"), std::string::npos);
    EXPECT_EQ(o.state, PingOutcome::State::kFailed);
    EXPECT_TRUE(o.held.empty());
  }
  PingOutcome bad;
  EXPECT_NE(readPing(pod, protocol::PingResponse{"a", "ua", "inc-1", 3, "11", {}}, 10, bad), "");
  EXPECT_EQ(bad.state, PingOutcome::State::kFailed);
  PingOutcome timedOut;
  EXPECT_EQ(readPing(pod, StatusOr<protocol::PingResponse>(deadlineExceeded("slow")), 10, timedOut)
                .rfind("ping: ", 0),
            0u);
  EXPECT_EQ(timedOut.state, PingOutcome::State::kFailed);
}

TEST(RoundEnd, MovesCountOnlyPastThePersist) {
  EXPECT_EQ(roundEnd("moved", 4, 1, 5s).moved, 4);
  EXPECT_EQ(roundEnd("partial", 4, 1, 5s).moved, 4);
  EXPECT_EQ(roundEnd("idle", std::nullopt, 1, 5s).moved, 0);
  for (auto result : {"conflict", "failed", "aborted"}) {
    EXPECT_EQ(roundEnd(result, 4, 1, 5s).moved, 0) << result;
  }
}

TEST(RoundEnd, FailuresAreRetriedAndAFirstConflictAtOnce) {
  EXPECT_FALSE(roundEnd("moved", 1, 1, 5s).retryIn);
  EXPECT_FALSE(roundEnd("idle", 0, 1, 5s).failed);
  EXPECT_FALSE(roundEnd("aborted", 0, 1, 5s).failed);
  EXPECT_TRUE(roundEnd("partial", 0, 1, 5s).failed);
  EXPECT_EQ(roundEnd("partial", 0, 1, 5s).retryIn, Duration(5s));
  EXPECT_EQ(roundEnd("failed", 0, 1, 5s).retryIn, Duration(5s));
  EXPECT_EQ(roundEnd("conflict", 0, 1, 5s).retryIn, Duration(0s));
  EXPECT_EQ(roundEnd("conflict", 0, 2, 5s).retryIn, Duration(5s));
  EXPECT_TRUE(roundEnd("conflict", 0, 2, 5s).failed);
}

}  // namespace
}  // namespace kshard::manager
