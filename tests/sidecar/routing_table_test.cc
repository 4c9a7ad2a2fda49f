#include "sidecar/routing_table.h"

#include <gtest/gtest.h>

#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

using testing::makeMap;

TEST(RoutingTableTest, EmptyUntilTheFirstMap) {
  RoutingTable t;
  auto s = t.snapshot();
  EXPECT_EQ(s->shardCount, 0);
  EXPECT_EQ(s->ownerOf(1), nullptr);
}

TEST(RoutingTableTest, ResolvesOwnersWithTheirAddresses) {
  RoutingTable t;
  ASSERT_TRUE(t.update(makeMap(10, 3, {{"p1", "1-5"}, {"p2", "6-9"}})));
  auto s = t.snapshot();
  ASSERT_NE(s->ownerOf(5), nullptr);
  EXPECT_EQ(s->ownerOf(5)->pod, "p1");
  EXPECT_EQ(s->ownerOf(6)->address, "10.0.0.2:7101");
  EXPECT_EQ(s->ownerOf(10), nullptr) << "shard 10 is unassigned";
  EXPECT_EQ(s->ownerOf(0), nullptr);
  EXPECT_EQ(s->ownerOf(11), nullptr);
  EXPECT_EQ(s->epoch, 3);
}

TEST(RoutingTableTest, FindsRegisteredPodsByName) {
  RoutingTable t;
  EXPECT_EQ(t.snapshot()->podNamed("p1"), nullptr);
  ASSERT_TRUE(t.update(makeMap(10, 3, {{"p1", "1-5"}, {"p2", "6-9"}})));
  auto s = t.snapshot();
  ASSERT_NE(s->podNamed("p2"), nullptr);
  EXPECT_EQ(s->podNamed("p2")->address, "10.0.0.2:7101");
  EXPECT_EQ(s->podNamed("p1")->pod, "p1");
  EXPECT_EQ(s->podNamed("p3"), nullptr);
  EXPECT_EQ(s->podNamed(""), nullptr);
}

TEST(RoutingTableTest, IgnoresAnOlderEpochButTakesTheSameOne) {
  RoutingTable t;
  ASSERT_TRUE(t.update(makeMap(10, 5, {{"p1", "1-10"}})));
  EXPECT_FALSE(t.update(makeMap(10, 4, {{"p2", "1-10"}})));
  EXPECT_EQ(t.snapshot()->ownerOf(1)->pod, "p1");
  auto same = makeMap(10, 5, {{"p1", "1-10"}});
  same.status.manager = sharding::ManagerRef{"op-1", "10.0.0.9:7200"};
  EXPECT_TRUE(t.update(same));
  ASSERT_TRUE(t.snapshot()->manager.has_value());
  EXPECT_EQ(t.snapshot()->manager->address, "10.0.0.9:7200");
}

TEST(RoutingTableTest, RejectsAStatusWithAShardOnTwoPods) {
  RoutingTable t;
  ASSERT_TRUE(t.update(makeMap(10, 1, {{"p1", "1-10"}})));
  EXPECT_FALSE(t.update(makeMap(10, 2, {{"p1", "1-6"}, {"p2", "5-10"}})));
  EXPECT_EQ(t.snapshot()->epoch, 1);
}

TEST(RoutingTableTest, OldSnapshotsStayValidAfterAnUpdate) {
  RoutingTable t;
  ASSERT_TRUE(t.update(makeMap(4, 1, {{"p1", "1-4"}})));
  auto old = t.snapshot();
  ASSERT_TRUE(t.update(makeMap(4, 2, {{"p2", "1-4"}})));
  EXPECT_EQ(old->ownerOf(1)->pod, "p1");
  EXPECT_EQ(t.snapshot()->ownerOf(1)->pod, "p2");
}

TEST(RoutingTableTest, RemembersDepartedPodsForFiveMinutes) {
  ManualClock clock;
  RoutingTable t(clock);
  ASSERT_TRUE(t.update(makeMap(4, 1, {{"p1", "1-2"}, {"p2", "3-4"}})));
  EXPECT_TRUE(t.snapshot()->departed.empty());
  clock.advance(std::chrono::seconds(3));
  ASSERT_TRUE(t.update(makeMap(4, 2, {{"p1", "1-4"}})));
  ASSERT_EQ(t.snapshot()->departed.size(), 1u);
  EXPECT_EQ(t.snapshot()->departed[0].pod, "p2");
  EXPECT_EQ(t.snapshot()->departed[0].uid, "p2-uid");
  EXPECT_EQ(t.snapshot()->departed[0].at, clock.now());
  // Kept across later statuses until five minutes have passed.
  clock.advance(std::chrono::minutes(4));
  ASSERT_TRUE(t.update(makeMap(4, 3, {{"p1", "1-4"}})));
  EXPECT_EQ(t.snapshot()->departed.size(), 1u);
  clock.advance(std::chrono::minutes(1));
  ASSERT_TRUE(t.update(makeMap(4, 4, {{"p1", "1-4"}})));
  EXPECT_TRUE(t.snapshot()->departed.empty());
  // A pod that comes back is no longer departed.
  ASSERT_TRUE(t.update(makeMap(4, 5, {{"p1", "1-4"}, {"p3", ""}})));
  ASSERT_TRUE(t.update(makeMap(4, 6, {{"p1", "1-4"}})));
  EXPECT_EQ(t.snapshot()->departed.size(), 1u);
  ASSERT_TRUE(t.update(makeMap(4, 7, {{"p1", "1-4"}, {"p3", ""}})));
  EXPECT_TRUE(t.snapshot()->departed.empty());
}

}  // namespace
}  // namespace kshard::sidecar
