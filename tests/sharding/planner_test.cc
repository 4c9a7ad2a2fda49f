// One test per rule of DESIGN.md "The planner (decide)"; the properties over random maps are in
// planner_property_test.cc.
#include "sharding/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace kshard::sharding {
namespace {

using ::testing::ElementsAre;

// A readable planning problem: pods in registration order, each with the shards it owns.
struct PodSpec {
  std::string ranges;  // shards it owns, range form
  std::string version = "1.0.0";
  bool ready = true;
  bool terminating = false;
};

PlanningInput input(std::int32_t shards, const std::vector<PodSpec>& pods, bool immediate = false,
                    double rate = 1.0) {
  PlanningInput in;
  in.shardCount = shards;
  in.owners.assign(static_cast<std::size_t>(shards), kNoPod);
  in.immediate = immediate;
  in.rebalanceRate = rate;
  for (std::size_t p = 0; p < pods.size(); ++p) {
    in.pods.push_back({pods[p].version, pods[p].ready, pods[p].terminating});
    StatusOr<ShardSet> owned = ShardSet::parse(pods[p].ranges, shards);
    EXPECT_TRUE(owned.ok()) << owned.status().toString();
    owned.valueOr(ShardSet()).forEach([&](ShardId s) {
      EXPECT_EQ(in.owners[static_cast<std::size_t>(s - 1)], kNoPod) << "shard " << s << " twice";
      in.owners[static_cast<std::size_t>(s - 1)] = static_cast<PodIndex>(p);
    });
  }
  return in;
}

std::vector<Move> plan(const PlanningInput& in, std::uint64_t seed = 1) {
  SeededRandom random(seed);
  StatusOr<std::vector<Move>> moves = decide(in, random);
  EXPECT_TRUE(moves.ok()) << moves.status().toString();
  return moves.valueOr({});
}

// Shard counts per pod after applying `moves`.
std::vector<std::int32_t> countsAfter(const PlanningInput& in, const std::vector<Move>& moves) {
  std::vector<PodIndex> owners = in.owners;
  for (const Move& m : moves) owners[static_cast<std::size_t>(m.shard - 1)] = m.to;
  std::vector<std::int32_t> counts(in.pods.size(), 0);
  for (PodIndex p : owners) {
    if (p != kNoPod) ++counts[static_cast<std::size_t>(p)];
  }
  return counts;
}

std::vector<PodIndex> sources(const std::vector<Move>& moves) {
  std::vector<PodIndex> out;
  for (const Move& m : moves) out.push_back(m.from.value_or(kNoPod));
  return out;
}

std::vector<PodIndex> targets(const std::vector<Move>& moves) {
  std::vector<PodIndex> out;
  for (const Move& m : moves) out.push_back(m.to);
  return out;
}

constexpr std::optional<PodIndex> kUnassigned = std::nullopt;

// --- When there are unassigned shards, or the round is immediate ---

TEST(PlannerTest, FirstPodGetsEveryShard) {
  const std::vector<Move> moves = plan(input(5, {{""}}));
  EXPECT_THAT(moves,
              ElementsAre(Move{1, kUnassigned, 0}, Move{2, kUnassigned, 0}, Move{3, kUnassigned, 0},
                          Move{4, kUnassigned, 0}, Move{5, kUnassigned, 0}));
}

TEST(PlannerTest, AnyUnassignedShardMeansOnlyUnassignedShardsArePlaced) {
  // Periodic round, badly balanced, one shard unassigned: only that shard moves.
  const PlanningInput in = input(10, {{"1-9"}, {""}});
  const std::vector<Move> moves = plan(in);
  EXPECT_THAT(moves, ElementsAre(Move{10, kUnassigned, 1}));
}

TEST(PlannerTest, ImmediateRoundPlacesOnlyUnassignedShards) {
  EXPECT_TRUE(plan(input(10, {{"1-10"}, {""}}, /*immediate=*/true)).empty());
  EXPECT_THAT(plan(input(10, {{"1-8"}, {""}}, /*immediate=*/true)),
              ElementsAre(Move{9, kUnassigned, 1}, Move{10, kUnassigned, 1}));
}

TEST(PlannerTest, PlacementIsNotCappedByTheRebalanceRate) {
  // The cap would be 1 shard per pod (100 x 0.01); placing is uncapped.
  const std::vector<Move> moves = plan(input(100, {{""}, {""}}, false, 0.01));
  EXPECT_EQ(moves.size(), 100u);
  EXPECT_THAT(countsAfter(input(100, {{""}, {""}}), moves), ElementsAre(50, 50));
}

TEST(PlannerTest, UnassignedShardsArePlacedInAscendingOrderOnTheEmptiestPod) {
  const std::vector<Move> moves = plan(input(9, {{"1-4"}, {"5"}, {"6-7"}}));
  EXPECT_THAT(moves, ElementsAre(Move{8, kUnassigned, 1}, Move{9, kUnassigned, 1}));
}

TEST(PlannerTest, UnassignedShardsStayUnassignedWhenNoPodCanReceive) {
  EXPECT_TRUE(plan(input(4, {{"", "1.0.0", false}, {"", "1.0.0", true, true}})).empty());
  EXPECT_TRUE(plan(input(4, {})).empty());
}

// --- Periodic round: what is offered ---

TEST(PlannerTest, EachPodAboveTheAverageOffersCountMinusAverage) {
  // average = 6 / 3 = 2: pods 0 and 1 offer one shard each, pod 2 none.
  const PlanningInput in = input(6, {{"1-3"}, {"4-6"}, {""}});
  const std::vector<Move> moves = plan(in);
  EXPECT_THAT(sources(moves), ElementsAre(0, 1));
  EXPECT_THAT(targets(moves), ElementsAre(2, 2));
  EXPECT_THAT(countsAfter(in, moves), ElementsAre(2, 2, 2));
}

TEST(PlannerTest, AverageIsIntegerDivisionOfShardsByPods) {
  // average = 7 / 3 = 2: pod 0 offers 5 shards; the balance rule stops after 4 moves.
  const PlanningInput in = input(7, {{"1-7"}, {""}, {""}});
  const std::vector<Move> moves = plan(in);
  EXPECT_EQ(moves.size(), 4u);
  EXPECT_THAT(countsAfter(in, moves), ElementsAre(3, 2, 2));
}

TEST(PlannerTest, OfferedShardsAreARandomSampleOfThePodsShards) {
  // Pod 0 owns 1-3 and offers one of them; every one of them gets picked for some seed.
  const PlanningInput in = input(4, {{"1-3"}, {"4"}});
  std::set<ShardId> picked;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    const std::vector<Move> moves = plan(in, seed);
    ASSERT_EQ(moves.size(), 1u);
    EXPECT_EQ(moves[0].from, std::optional<PodIndex>(0));
    EXPECT_EQ(moves[0].to, 1);
    picked.insert(moves[0].shard);
    EXPECT_EQ(plan(in, seed), moves) << "same seed, same decision";
  }
  EXPECT_EQ(picked, (std::set<ShardId>{1, 2, 3}));
}

TEST(PlannerTest, NothingIsOfferedWhilePodsRunDifferentVersions) {
  EXPECT_TRUE(plan(input(10, {{"1-10", "1.0.0"}, {"", "2.0.0"}})).empty());
  // Not-ready and terminating pods count: they are part of the rolling update.
  EXPECT_TRUE(plan(input(10, {{"1-10"}, {""}, {"", "2.0.0", false}})).empty());
  EXPECT_TRUE(plan(input(10, {{"1-10"}, {""}, {"", "0.9.0", true, true}})).empty());
}

// --- Periodic round: the order shards are placed in ---

TEST(PlannerTest, ShardsOfThePodsWithMostShardsArePlacedFirst) {
  // Pod 1 has the most shards, so its four extra shards go before pod 0's two.
  const PlanningInput in = input(12, {{"1-5"}, {"6-12"}, {""}, {""}});
  const std::vector<Move> moves = plan(in);
  EXPECT_THAT(sources(moves), ElementsAre(1, 1, 1, 1, 0, 0));
  EXPECT_THAT(countsAfter(in, moves), ElementsAre(3, 3, 3, 3));
}

TEST(PlannerTest, AmongEqualPodsShardsOfTheOlderRegistrationArePlacedFirst) {
  const std::vector<Move> first = plan(input(10, {{"1-5"}, {"6-10"}, {""}, {""}}));
  EXPECT_THAT(sources(first), ElementsAre(0, 0, 0, 1, 1));
  // Same counts, registration order swapped: now pod 0 holds 6-10 and goes first.
  const std::vector<Move> swapped = plan(input(10, {{"6-10"}, {"1-5"}, {""}, {""}}));
  EXPECT_THAT(sources(swapped), ElementsAre(0, 0, 0, 1, 1));
  for (const Move& m : swapped) {
    if (m.from == std::optional<PodIndex>(0)) {
      EXPECT_GE(m.shard, 6);
    }
  }
}

// --- Which pod receives ---

TEST(PlannerTest, ThePodWithFewestShardsReceives) {
  EXPECT_THAT(plan(input(7, {{"1-3"}, {"4"}, {"5-6"}})), ElementsAre(Move{7, kUnassigned, 1}));
}

TEST(PlannerTest, TiesGoToThePodRegisteredFirst) {
  EXPECT_THAT(plan(input(6, {{"1-3"}, {"4"}, {"5"}})), ElementsAre(Move{6, kUnassigned, 1}));
  EXPECT_THAT(
      plan(input(3, {{""}, {""}, {""}})),
      ElementsAre(Move{1, kUnassigned, 0}, Move{2, kUnassigned, 1}, Move{3, kUnassigned, 2}));
}

TEST(PlannerTest, NotReadyPodsReceiveNothing) {
  const std::vector<Move> moves = plan(input(4, {{"", "1.0.0", false}, {"1"}}));
  EXPECT_THAT(targets(moves), ElementsAre(1, 1, 1));
}

TEST(PlannerTest, TerminatingPodsReceiveNothing) {
  const std::vector<Move> moves = plan(input(4, {{"", "1.0.0", true, true}, {"1"}}));
  EXPECT_THAT(targets(moves), ElementsAre(1, 1, 1));
}

TEST(PlannerTest, OnlyPodsOfTheNewestVersionReceive) {
  // Pod 0 is emptier but runs 1.9.0; 1.10.0 is newer.
  const std::vector<Move> moves =
      plan(input(6, {{"", "1.9.0"}, {"1-2", "1.10.0"}, {"3", "1.10.0"}, {"", "1.2.0"}}));
  EXPECT_THAT(targets(moves), ElementsAre(2, 1, 2));
}

TEST(PlannerTest, NewestVersionIsTakenAmongPodsThatCanReceive) {
  // The 2.0.0 pod is not ready yet: shards go to the ready 1.0.0 pod rather than stay
  // unassigned, since a not-ready pod may never become ready.
  const std::vector<Move> moves = plan(input(2, {{"", "1.0.0"}, {"", "2.0.0", false}}));
  EXPECT_THAT(targets(moves), ElementsAre(0, 0));
}

TEST(PlannerTest, APodThatLostAShardInThisRoundReceivesNone) {
  // average 2; pods 0 and 1 offer two shards each; pod 3 cannot receive. After pod 0 gave two
  // shards to pod 2 it is the emptiest pod, but it lost shards in this round, so pod 1's shard
  // goes to pod 2 as well.
  const PlanningInput in = input(8, {{"1-4"}, {"5-8"}, {""}, {"", "1.0.0", false}});
  const std::vector<Move> moves = plan(in);
  EXPECT_THAT(sources(moves), ElementsAre(0, 0, 1));
  EXPECT_THAT(targets(moves), ElementsAre(2, 2, 2));
  EXPECT_THAT(countsAfter(in, moves), ElementsAre(2, 3, 3, 0));
}

// --- When a move is not worth it ---

TEST(PlannerTest, NoMoveWhenTheChosenPodIsTheCurrentOwner) {
  // Pod 0 offers two shards, but it is the only pod that can receive.
  EXPECT_TRUE(plan(input(4, {{"1-4"}, {"", "1.0.0", false}})).empty());
}

TEST(PlannerTest, NoMoveWhenTheChosenPodHasOnlyOneShardFewer) {
  // average 2: pod 0 offers one shard, pod 1 would then have 3 and pod 0 2: just a swap.
  EXPECT_TRUE(plan(input(5, {{"1-3"}, {"4-5"}})).empty());
  // Two fewer: worth it.
  EXPECT_EQ(plan(input(6, {{"1-4"}, {"5-6"}})).size(), 1u);
}

// --- The rate cap ---

TEST(PlannerTest, PeriodicRoundGivesAPodAtMostRebalanceRateTimesShards) {
  // 100 shards x 0.02 = 2 per pod per round.
  const PlanningInput in = input(100, {{"1-100"}, {""}, {""}}, false, 0.02);
  const std::vector<Move> moves = plan(in);
  EXPECT_THAT(countsAfter(in, moves), ElementsAre(96, 2, 2));
}

TEST(PlannerTest, ReceiveCapRoundsUpAndIsAtLeastOne) {
  EXPECT_EQ(periodicReceiveCap(300, 0.02), 6);
  EXPECT_EQ(periodicReceiveCap(100, 0.07), 7);  // 7.000000000000001 in floating point
  EXPECT_EQ(periodicReceiveCap(10, 0.15), 2);   // 1.5 rounds up
  EXPECT_EQ(periodicReceiveCap(10, 0.01), 1);   // never 0
  EXPECT_EQ(periodicReceiveCap(4, 1.0), 4);
  EXPECT_EQ(periodicReceiveCap(100000, 0.02), 2000);
}

// --- Withheld shards (the operator's repeated-failure throttle) ---

TEST(PlannerTest, AWithheldShardIsNeverOffered) {
  // Pod 0 offers one of 1-3; with 2 withheld, every seed picks 1 or 3, and both get picked.
  PlanningInput in = input(4, {{"1-3"}, {"4"}});
  in.withheld = {false, true, false, false};
  std::set<ShardId> picked;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    const std::vector<Move> moves = plan(in, seed);
    ASSERT_EQ(moves.size(), 1u) << "seed " << seed;
    picked.insert(moves[0].shard);
  }
  EXPECT_EQ(picked, (std::set<ShardId>{1, 3}));
}

TEST(PlannerTest, APodOffersOnlyWhatIsNotWithheld) {
  // average 2: pod 0 would offer two of 1-4. Three are withheld: only 4 moves.
  PlanningInput in = input(6, {{"1-4"}, {"5"}, {"6"}});
  in.withheld = {true, true, true, false, false, false};
  const std::vector<Move> moves = plan(in);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].shard, 4);
  // All withheld: nothing moves, and the map stays unbalanced.
  in.withheld[3] = true;
  EXPECT_TRUE(plan(in).empty());
}

TEST(PlannerTest, PlacementIgnoresWithheldShards) {
  // The withheld vector may mark anything; shards without an owner are placed all the same.
  PlanningInput in = input(4, {{"1-2"}, {""}});
  in.withheld.assign(4, true);
  const std::vector<Move> moves = plan(in);
  EXPECT_THAT(sources(moves), ElementsAre(kNoPod, kNoPod));
  EXPECT_THAT(countsAfter(in, moves), ElementsAre(2, 2));
}

TEST(PlannerTest, NothingWithheldGivesTheSameDecisionAsNoWithheldList) {
  PlanningInput in = input(300, {{"1-200"}, {"201-300"}, {""}}, false, 0.02);
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    const std::vector<Move> without = plan(in, seed);
    PlanningInput none = in;
    none.withheld.assign(300, false);
    EXPECT_EQ(plan(none, seed), without) << "seed " << seed;
  }
}

// --- Examples and input checks ---

TEST(PlannerTest, KshardctlExampleMovesOneOfShardsOneToThreeToTheSecondPod) {
  const std::vector<Move> moves = plan(input(4, {{"1-3"}, {"4"}}), 7);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_GE(moves[0].shard, 1);
  EXPECT_LE(moves[0].shard, 3);
  EXPECT_EQ(moves[0].from, std::optional<PodIndex>(0));
  EXPECT_EQ(moves[0].to, 1);
}

TEST(PlannerTest, RejectsInconsistentInput) {
  SeededRandom random(1);
  PlanningInput in = input(4, {{"1-4"}});
  in.owners[2] = 1;
  EXPECT_EQ(decide(in, random).status().message(),
            "shard 3 is owned by pod index 1, outside the 1 pods");
  in = input(4, {{"1-4"}});
  in.owners.pop_back();
  EXPECT_EQ(decide(in, random).status().message(), "owners has 3 entries for 4 shards");
  in = input(4, {{"1-4"}});
  in.rebalanceRate = 0;
  EXPECT_EQ(decide(in, random).status().message(), "rebalanceRate must be > 0 and <= 1");
  in.rebalanceRate = 1.01;
  EXPECT_EQ(decide(in, random).status().code(), StatusCode::kInvalidArgument);
  in = input(4, {{"1-4"}});
  in.shardCount = 0;
  in.owners.clear();
  EXPECT_EQ(decide(in, random).status().message(), "shard count 0 is outside 1..100000");
  in = input(4, {{"1-4"}});
  in.withheld = {true};
  EXPECT_EQ(decide(in, random).status().message(), "withheld has 1 entries for 4 shards");
}

}  // namespace
}  // namespace kshard::sharding
