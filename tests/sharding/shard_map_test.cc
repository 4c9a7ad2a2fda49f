#include "sharding/shard_map.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace kshard::sharding {
namespace {

ShardMapSpec validSpec() {
  ShardMapSpec spec;
  spec.shards = 300;
  return spec;
}

ShardSet set(std::string_view text, std::int32_t n = 10) {
  StatusOr<ShardSet> s = ShardSet::parse(text, n);
  EXPECT_TRUE(s.ok()) << s.status().toString();
  return s.valueOr(ShardSet());
}

ShardMapStatus statusWithPods(std::initializer_list<const char*> names) {
  ShardMapStatus status;
  for (const char* n : names) status.pods.push_back({n, std::string(n) + "-uid", "", "1.0.0", 0, "", std::nullopt});
  return status;
}

TEST(ShardMapSpecTest, DefaultsAreThoseOfTheDesign) {
  const ShardMapSpec spec;
  EXPECT_EQ(spec.versionLabel, "app.kubernetes.io/version");
  EXPECT_EQ(spec.rebalanceInterval, std::chrono::seconds(20));
  EXPECT_EQ(spec.rebalanceRetryInterval, std::chrono::seconds(10));
  EXPECT_DOUBLE_EQ(spec.rebalanceRate, 0.02);
  EXPECT_EQ(spec.pingTimeout, std::chrono::seconds(3));
  EXPECT_EQ(spec.handoffTimeout, std::chrono::seconds(30));
  EXPECT_EQ(spec.entityIdleTimeout, std::chrono::seconds(60));
  EXPECT_EQ(spec.sendTimeout, std::chrono::seconds(10));
  EXPECT_EQ(spec.maxActiveEntitiesPerPod, 0) << "no limit unless asked";
}

TEST(ShardMapSpecTest, ValidationNamesTheField) {
  EXPECT_TRUE(validateSpec(validSpec()).ok());
  ShardMapSpec s = validSpec();
  s.shards = 0;
  EXPECT_EQ(validateSpec(s).message(), "spec.shards: must be in 1..100000");
  s = validSpec();
  s.rebalanceRate = 0;
  EXPECT_EQ(validateSpec(s).message(), "spec.rebalanceRate: must be > 0 and <= 1");
  s.rebalanceRate = 1.5;
  EXPECT_EQ(validateSpec(s).message(), "spec.rebalanceRate: must be > 0 and <= 1");
  s.rebalanceRate = std::nan("");
  EXPECT_EQ(validateSpec(s).message(), "spec.rebalanceRate: must be > 0 and <= 1");
  s = validSpec();
  s.pingTimeout = Duration::zero();
  EXPECT_EQ(validateSpec(s).message(), "spec.pingTimeout: must be > 0");
  s = validSpec();
  s.versionLabel = "";
  EXPECT_EQ(validateSpec(s).message(), "spec.versionLabel: must not be empty");
  s = validSpec();
  s.entityIdleTimeout = Duration::zero();  // never passivate
  EXPECT_TRUE(validateSpec(s).ok());
  s.entityIdleTimeout = std::chrono::seconds(-1);
  EXPECT_EQ(validateSpec(s).message(), "spec.entityIdleTimeout: must be >= 0 (0 = never)");
  s = validSpec();
  s.maxActiveEntitiesPerPod = -1;
  EXPECT_EQ(validateSpec(s).message(), "spec.maxActiveEntitiesPerPod: must be >= 0 (0 = no limit)");
}

TEST(ConditionTest, SetConditionKeepsTransitionTimeWhileTheStatusHolds) {
  std::vector<Condition> conditions;
  EXPECT_TRUE(setCondition(conditions, {"Ready", "True", 1, "t1", "AllPodsReady", "ok"}));
  EXPECT_FALSE(setCondition(conditions, {"Ready", "True", 1, "t2", "AllPodsReady", "ok"}));
  EXPECT_TRUE(setCondition(conditions, {"Ready", "True", 2, "t3", "AllPodsReady", "still ok"}));
  ASSERT_NE(findCondition(conditions, "Ready"), nullptr);
  EXPECT_EQ(findCondition(conditions, "Ready")->lastTransitionTime, "t1");
  EXPECT_EQ(findCondition(conditions, "Ready")->observedGeneration, 2);
  EXPECT_TRUE(setCondition(conditions, {"Ready", "False", 2, "t4", "NoPods", "no pods"}));
  EXPECT_EQ(findCondition(conditions, "Ready")->lastTransitionTime, "t4");
  EXPECT_TRUE(setCondition(conditions, {"Balanced", "True", 2, "t5", "Balanced", ""}));
  EXPECT_EQ(conditions.size(), 2u);
  EXPECT_EQ(findCondition(conditions, "Progressing"), nullptr);
}

TEST(ShardTableTest, StartsUnassignedAndTracksOwnersAndEpochs) {
  ShardTable t(5);
  EXPECT_EQ(t.shardCount(), 5);
  EXPECT_EQ(t.unassigned().toString(), "1-5");
  t.assign(2, 0, 7);
  t.assign(3, 1, 8);
  EXPECT_EQ(t.owner(2), 0);
  EXPECT_EQ(t.epoch(2), 7);
  EXPECT_EQ(t.owner(1), kNoPod);
  EXPECT_EQ(t.shardCounts(2), (std::vector<std::int32_t>{1, 1}));
  t.unassign(2);
  EXPECT_EQ(t.owner(2), kNoPod);
  EXPECT_EQ(t.epoch(2), 0);
  EXPECT_EQ(t.unassigned().toString(), "1-2,4-5");
}

TEST(ShardTableTest, RemovePodUnassignsItsShardsAndRenumbersLaterPods) {
  ShardTable t(4);
  t.assign(1, 0, 1);
  t.assign(2, 1, 1);
  t.assign(3, 2, 1);
  t.removePod(1);
  EXPECT_EQ(t.owner(1), 0);
  EXPECT_EQ(t.owner(2), kNoPod);
  EXPECT_EQ(t.owner(3), 1);
  EXPECT_EQ(t.owner(4), kNoPod);
}

TEST(ShardTableTest, WritesAssignmentsPerPodAndEpochInRegistrationOrder) {
  ShardTable t(10);
  for (ShardId s : {1, 2, 3}) t.assign(s, 1, 5);
  for (ShardId s : {4, 6}) t.assign(s, 1, 9);
  for (ShardId s : {7, 8}) t.assign(s, 0, 9);
  ShardMapStatus status = statusWithPods({"a", "b", "c"});
  writeShardTable(t, status);
  ASSERT_EQ(status.assignments.size(), 3u);
  EXPECT_EQ(status.assignments[0], (Assignment{"a", 9, set("7-8")}));
  EXPECT_EQ(status.assignments[1], (Assignment{"b", 5, set("1-3")}));
  EXPECT_EQ(status.assignments[2], (Assignment{"b", 9, set("4,6")}));
  EXPECT_EQ(status.unassigned.toString(), "5,9-10");
  EXPECT_EQ(status.unassignedCount, 3);
  EXPECT_EQ(status.podCount, 3);
  EXPECT_EQ(status.pods[0].shards, 2);
  EXPECT_EQ(status.pods[1].shards, 5);
  EXPECT_EQ(status.pods[2].shards, 0);
}

TEST(ShardTableTest, StatusRoundTripsThroughTheTable) {
  ShardMapStatus status = statusWithPods({"a", "b"});
  status.assignments = {{"b", 3, set("1-4")}, {"a", 4, set("5,7")}, {"b", 6, set("6")}};
  status.unassigned = set("8-10");
  StatusOr<ShardTable> t = shardTableFromStatus(status, 10);
  ASSERT_TRUE(t.ok()) << t.status().toString();
  EXPECT_EQ(t->owner(1), 1);
  EXPECT_EQ(t->epoch(1), 3);
  EXPECT_EQ(t->owner(5), 0);
  EXPECT_EQ(t->epoch(6), 6);
  EXPECT_EQ(t->owner(9), kNoPod);
  ShardMapStatus written = statusWithPods({"a", "b"});
  writeShardTable(*t, written);
  StatusOr<ShardTable> again = shardTableFromStatus(written, 10);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *t);
}

TEST(ShardTableTest, ShardsInNoAssignmentAreUnassigned) {
  ShardMapStatus status = statusWithPods({"a"});
  status.assignments = {{"a", 1, set("1-3")}};
  StatusOr<ShardTable> t = shardTableFromStatus(status, 10);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->unassigned().toString(), "4-10");
}

TEST(ShardTableTest, RejectsStatusThatWouldGiveAShardTwoOwners) {
  ShardMapStatus status = statusWithPods({"a", "b"});
  status.assignments = {{"a", 1, set("1-5")}, {"b", 2, set("5-6")}};
  EXPECT_EQ(shardTableFromStatus(status, 10).status().message(),
            "status.assignments[1].shards: shard 5 is also in status.assignments[0]");
  status.assignments = {{"a", 1, set("1-5")}};
  status.unassigned = set("5");
  EXPECT_EQ(shardTableFromStatus(status, 10).status().message(),
            "status.unassigned: shard 5 is also assigned");
}

TEST(ShardTableTest, RejectsUnknownAndDuplicatePods) {
  ShardMapStatus status = statusWithPods({"a", "b"});
  status.assignments = {{"c", 1, set("1")}};
  EXPECT_EQ(shardTableFromStatus(status, 10).status().message(),
            "status.assignments[0].pod: \"c\" is not in status.pods");
  status = statusWithPods({"a", "b", "a"});
  EXPECT_EQ(shardTableFromStatus(status, 10).status().message(),
            "status.pods[2].name: duplicate pod \"a\"");
}

TEST(ShardTableTest, RejectsAShardCountOutsideTheSpecLimits) {
  EXPECT_EQ(shardTableFromStatus(ShardMapStatus(), 0).status().message(),
            "spec.shards: must be in 1..100000");
  EXPECT_EQ(shardTableFromStatus(ShardMapStatus(), -1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ShardTableTest, RejectsShardsBeyondTheShardCount) {
  ShardMapStatus status = statusWithPods({"a"});
  status.assignments = {{"a", 1, set("1-10")}};
  EXPECT_EQ(shardTableFromStatus(status, 8).status().message(),
            "status.assignments[0].shards: outside 1..8");
}

}  // namespace
}  // namespace kshard::sharding
