#include "operator/shard_map_conditions.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

sharding::ShardMapStatus statusWith(std::vector<std::int32_t> counts, std::int32_t unassigned,
                                    std::vector<std::string> versions = {}) {
  sharding::ShardMapStatus s;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    s.pods.push_back({"p" + std::to_string(i), "u", "a:1",
                      i < versions.size() ? versions[i] : std::string("1"), counts[i], "inc", {}});
  }
  s.unassignedCount = unassigned;
  return s;
}

const sharding::Condition& get(const sharding::ShardMapStatus& s, const char* type) {
  const auto* c = sharding::findCondition(s.conditions, type);
  EXPECT_NE(c, nullptr) << type;
  static const sharding::Condition kNone;
  return c ? *c : kNone;
}

ConditionFacts facts(std::string now = "2026-01-01T00:00:00Z") {
  ConditionFacts f;
  f.generation = 4;
  f.now = std::move(now);
  return f;
}

TEST(UpdateConditions, NoPodsIsNotReady) {
  auto s = statusWith({}, 30);
  EXPECT_TRUE(updateConditions(s, facts()));
  EXPECT_EQ(s.observedGeneration, 4);
  EXPECT_EQ(get(s, "Ready").status, "False");
  EXPECT_EQ(get(s, "Ready").reason, "NoPods");
  EXPECT_EQ(get(s, "Ready").observedGeneration, 4);
  EXPECT_EQ(get(s, "Balanced").status, "False");
  EXPECT_EQ(get(s, "Progressing").status, "False");
}

TEST(UpdateConditions, AllAssignedAndWithinOneIsReadyAndBalanced) {
  auto s = statusWith({10, 11, 10}, 0);
  updateConditions(s, facts());
  EXPECT_EQ(get(s, "Ready").status, "True");
  EXPECT_EQ(get(s, "Balanced").status, "True");
  EXPECT_EQ(get(s, "Balanced").message, "shards per pod: 10..11");
}

TEST(UpdateConditions, UnassignedShardsAreNotReady) {
  auto s = statusWith({10, 10}, 5);
  updateConditions(s, facts());
  EXPECT_EQ(get(s, "Ready").status, "False");
  EXPECT_EQ(get(s, "Ready").reason, "ShardsUnassigned");
  EXPECT_EQ(get(s, "Ready").message, "5 shards have no owner");
}

TEST(UpdateConditions, MixedVersionsExplainTheImbalance) {
  auto s = statusWith({20, 0}, 0, {"1.0", "2.0"});
  updateConditions(s, facts());
  EXPECT_EQ(get(s, "Balanced").status, "False");
  EXPECT_EQ(get(s, "Balanced").reason, "RollingUpdate");
}

TEST(UpdateConditions, ProgressingFollowsRetriesAndPendingMoves) {
  auto s = statusWith({20, 0}, 0);
  auto f = facts();
  f.movesPending = true;
  updateConditions(s, f);
  EXPECT_EQ(get(s, "Progressing").status, "True");
  EXPECT_EQ(get(s, "Progressing").reason, "Rebalancing");
  f.retryPending = true;
  updateConditions(s, f);
  EXPECT_EQ(get(s, "Progressing").reason, "RetryPending");
}

TEST(UpdateConditions, UnchangedFactsChangeNothingNotEvenTheTime) {
  auto s = statusWith({10, 10}, 0);
  EXPECT_TRUE(updateConditions(s, facts("2026-01-01T00:00:00Z")));
  const auto before = s;
  EXPECT_FALSE(updateConditions(s, facts("2026-01-01T00:05:00Z")));
  EXPECT_EQ(s, before);
}

TEST(UpdateConditions, TransitionTimeMovesOnlyWithTheStatus) {
  auto s = statusWith({10, 10}, 0);
  updateConditions(s, facts("2026-01-01T00:00:00Z"));
  s.unassignedCount = 3;
  EXPECT_TRUE(updateConditions(s, facts("2026-01-01T00:05:00Z")));
  EXPECT_EQ(get(s, "Ready").lastTransitionTime, "2026-01-01T00:05:00Z");
  EXPECT_EQ(get(s, "Balanced").lastTransitionTime, "2026-01-01T00:00:00Z");
}

}  // namespace
}  // namespace kshard::manager
