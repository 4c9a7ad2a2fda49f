// The repeated-failure throttle's bookkeeping (operator/handoff_throttle.h), on simulated time:
// when a shard enters a backoff, how long it lasts, and what makes its count start over.
#include "operator/handoff_throttle.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

sharding::ShardMapSpec specWith(std::int32_t limit, Duration backoff) {
  sharding::ShardMapSpec spec;
  spec.shards = 10;
  spec.handoffFailureLimit = limit;
  spec.handoffBackoff = backoff;
  return spec;
}

sharding::RegisteredPod pod(const std::string& name, const std::string& uid = "") {
  sharding::RegisteredPod p;
  p.name = name;
  p.uid = uid.empty() ? "uid-" + name : uid;
  return p;
}

// Shards 1-5 owned by pod 0, 6-10 by pod 1.
sharding::ShardTable twoPods() {
  sharding::ShardTable table(10);
  for (sharding::ShardId s = 1; s <= 10; ++s) table.assign(s, s <= 5 ? 0 : 1, 1);
  return table;
}

const SteadyTime kT0 = SteadyTime{} + 1000s;

TEST(HandoffBackoff, DoublesPerFailureBeyondTheLimitUpToTenMinutes) {
  const auto spec = specWith(3, 30s);
  EXPECT_EQ(handoffBackoff(2, spec), Duration::zero());
  EXPECT_EQ(handoffBackoff(3, spec), Duration(30s));
  EXPECT_EQ(handoffBackoff(4, spec), Duration(60s));
  EXPECT_EQ(handoffBackoff(6, spec), Duration(240s));
  EXPECT_EQ(handoffBackoff(8, spec), Duration(kMaxHandoffBackoff));
  EXPECT_EQ(handoffBackoff(1'000'000, spec), Duration(kMaxHandoffBackoff));
  EXPECT_EQ(handoffBackoff(3, specWith(3, 1h)), Duration(kMaxHandoffBackoff));
  // A limit of 0 never throttles.
  EXPECT_EQ(handoffBackoff(100, specWith(0, 30s)), Duration::zero());
}

TEST(HandoffThrottle, AShardIsWithheldFromTheLimitUntilItsBackoffPassed) {
  const auto spec = specWith(3, 30s);
  HandoffThrottle t;
  EXPECT_FALSE(t.failed(4, pod("a"), kT0, spec));
  EXPECT_FALSE(t.failed(4, pod("a"), kT0 + 10s, spec));
  EXPECT_TRUE(t.withheld(10, kT0 + 10s, spec).empty()) << "withheld below the limit";
  const auto start = t.failed(4, pod("a"), kT0 + 20s, spec);
  ASSERT_TRUE(start.has_value());
  EXPECT_EQ(start->shard, 4);
  EXPECT_EQ(start->inARow, 3);
  EXPECT_EQ(start->until, kT0 + 50s);
  EXPECT_EQ(start->backoff, Duration(30s));
  std::vector<bool> withheld = t.withheld(10, kT0 + 49s, spec);
  ASSERT_EQ(withheld.size(), 10u);
  EXPECT_TRUE(withheld[3]);
  EXPECT_EQ(std::count(withheld.begin(), withheld.end(), true), 1);
  EXPECT_EQ(t.throttled(kT0 + 49s, spec), 1u);
  // Once it passed, the shard may be offered again: one more attempt.
  EXPECT_TRUE(t.withheld(10, kT0 + 50s, spec).empty());
  EXPECT_EQ(t.throttled(kT0 + 50s, spec), 0u);
  // That attempt fails too: twice as long.
  const auto again = t.failed(4, pod("a"), kT0 + 60s, spec);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->inARow, 4);
  EXPECT_EQ(again->until, kT0 + 120s);
}

TEST(HandoffThrottle, ASuccessStartsTheCountOver) {
  const auto spec = specWith(3, 30s);
  HandoffThrottle t;
  (void)t.failed(2, pod("a"), kT0, spec);
  (void)t.failed(2, pod("a"), kT0, spec);
  t.succeeded(2);
  EXPECT_EQ(t.failuresOf(2), 0);
  EXPECT_FALSE(t.failed(2, pod("a"), kT0, spec));
  EXPECT_FALSE(t.failed(2, pod("a"), kT0, spec));
  EXPECT_TRUE(t.failed(2, pod("a"), kT0, spec));
  t.succeeded(2);
  EXPECT_TRUE(t.withheld(10, kT0, spec).empty()) << "a released shard stayed withheld";
}

TEST(HandoffThrottle, FailuresAreForgottenOnceTheShardHasAnotherOwner) {
  const auto spec = specWith(1, 30s);
  const std::vector<sharding::RegisteredPod> pods{pod("a"), pod("b")};
  HandoffThrottle t;
  ASSERT_TRUE(t.failed(2, pods[0], kT0, spec));
  ASSERT_TRUE(t.failed(7, pods[1], kT0, spec));
  sharding::ShardTable table = twoPods();
  t.forgetMoved(table, pods);
  EXPECT_EQ(t.throttled(kT0, spec), 2u) << "owners unchanged: nothing to forget";
  // a drained: shard 2 is unassigned (then placed elsewhere); b's shard 7 stays.
  table.unassign(2);
  t.forgetMoved(table, pods);
  EXPECT_EQ(t.failuresOf(2), 0);
  EXPECT_EQ(t.failuresOf(7), 1);
  // b was replaced by a pod of the same name with another uid: its failures are not the new pod's.
  t.forgetMoved(table, {pod("a"), pod("b", "uid-b-2")});
  EXPECT_EQ(t.failuresOf(7), 0);
}

TEST(HandoffThrottle, AFailureFromAnotherPodCountsAfresh) {
  const auto spec = specWith(2, 30s);
  HandoffThrottle t;
  EXPECT_FALSE(t.failed(3, pod("a"), kT0, spec));
  EXPECT_FALSE(t.failed(3, pod("b"), kT0, spec));
  EXPECT_EQ(t.failuresOf(3), 1);
}

TEST(HandoffThrottle, ALimitOfZeroNeverThrottlesAndSpecChangesApplyAtOnce) {
  HandoffThrottle t;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(t.failed(1, pod("a"), kT0, specWith(0, 30s)));
  EXPECT_TRUE(t.withheld(10, kT0, specWith(0, 30s)).empty());
  // The limit is raised... or lowered: the count so far is judged by the spec of the moment.
  EXPECT_EQ(t.throttled(kT0, specWith(5, 30s)), 1u);
  EXPECT_EQ(t.throttled(kT0, specWith(11, 30s)), 0u);
}

}  // namespace
}  // namespace kshard::manager
