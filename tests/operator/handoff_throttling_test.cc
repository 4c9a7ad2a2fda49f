// Component tests of the repeated-failure throttle (operator/handoff_throttle.h): the controller
// against stub pods whose app cannot stop some entities, on simulated time. The harness checks
// after every event that no shard is served by two pods (ControllerHarness::checkInvariant).
#include <gtest/gtest.h>

#include <chrono>

#include "tests/operator/controller_harness.h"

namespace kshard::manager::testing {
namespace {

using namespace std::chrono_literals;

constexpr Duration kBackoff = 120s;

void tweak(sharding::ShardMapSpec& spec) {
  spec.handoffTimeout = 5s;
  spec.handoffFailureLimit = 3;
  spec.handoffBackoff = kBackoff;
}

// How many unassigns sent to `pod` named `shard`.
int attempts(const StubPod& pod, sharding::ShardId shard) {
  int n = 0;
  for (const auto& r : pod.unassignLog) n += r.shards.contains(shard) ? 1 : 0;
  return n;
}

double throttled(ControllerHarness& h) {
  return h.metrics.throttled().with({{"shard_map", kMapKey}}).value();
}

double throttleStarts(ControllerHarness& h) {
  return h.metrics.throttleStarts().with({{"shard_map", kMapKey}}).value();
}

std::vector<std::string> throttleEvents(const ControllerHarness& h) {
  std::vector<std::string> out;
  for (const auto& e : h.events.events) {
    if (e.reason == "HandoffThrottled") {
      EXPECT_EQ(e.type, EventType::kWarning);
      out.push_back(e.message);
    }
  }
  return out;
}

// Pod a owns both shards of a two-shard map, and its app fails every stop of their entities;
// then b registers, so every periodic round asks a for one of them.
struct StuckPod {
  explicit StuckPod(std::int32_t limit = 3)
      : h(2, [limit](sharding::ShardMapSpec& spec) {
          tweak(spec);
          spec.handoffFailureLimit = limit;
        }) {
    h.lead();
    h.startPod("a");
    EXPECT_EQ(h.registerPod("a"), 200);
    EXPECT_TRUE(h.runUntil([&] { return h.counts()["a"] == 2; }, 10s));
    a = h.pods.find("a");
    for (sharding::ShardId s : {1, 2}) {
      const std::string id = "e" + std::to_string(s);
      EXPECT_TRUE(h.pods.touch("a", s, id));
      a->host->failingStops.insert(id);
    }
    h.startPod("b");
    EXPECT_EQ(h.registerPod("b"), 200);
  }
  ControllerHarness h;
  StubPod* a = nullptr;
};

TEST(HandoffThrottling, AShardIsTriedLimitTimesThenNotUntilItsBackoffThenOnceMore) {
  StuckPod s;
  ControllerHarness& h = s.h;
  ASSERT_TRUE(h.runUntil([&] { return throttled(h) >= 1; }, 600s)) << "no shard was throttled";
  const SteadyTime first = h.scheduler.clock().now();
  ASSERT_TRUE(h.runUntil([&] { return throttled(h) == 2; }, kBackoff - 5s))
      << "the second shard was not throttled within the first's backoff";
  // Each shard was tried exactly the limit: nothing else was ever asked of a.
  EXPECT_EQ(attempts(*s.a, 1), 3);
  EXPECT_EQ(attempts(*s.a, 2), 3);
  EXPECT_EQ(s.a->unassigns, 6);
  EXPECT_EQ(throttleStarts(h), 2);
  auto events = throttleEvents(h);
  ASSERT_EQ(events.size(), 2u);
  for (const auto& m : events) {
    EXPECT_NE(m.find("from pod a failed 3 times in a row"), std::string::npos) << m;
    EXPECT_NE(m.find("(backoff 2m0s)"), std::string::npos) << m;
  }
  const sharding::ShardId firstShard = events[0].find("shard 1 ") != std::string::npos ? 1 : 2;

  // Nothing is asked of a until the first backoff has passed; then the first shard, once.
  const int before = s.a->unassigns;
  ASSERT_TRUE(h.runUntil([&] { return s.a->unassigns > before; }, 600s));
  EXPECT_GE(h.scheduler.clock().now() - first, kBackoff);
  EXPECT_EQ(attempts(*s.a, firstShard), 4);
  ASSERT_TRUE(h.runUntil([&] { return throttleEvents(h).size() == 3; }, 30s));
  const std::string again = throttleEvents(h)[2];
  EXPECT_NE(again.find("shard " + std::to_string(firstShard) + " from pod a failed 4 times"),
            std::string::npos)
      << again;
  EXPECT_NE(again.find("(backoff 4m0s)"), std::string::npos) << again;
  EXPECT_EQ(throttleStarts(h), 3);
  EXPECT_EQ(s.a->unassigns, before + 1);
  EXPECT_EQ(h.counts()["a"], 2);
  EXPECT_EQ(h.counts()["b"], 0);
}

TEST(HandoffThrottling, ASuccessfulHandoffEndsTheThrottle) {
  StuckPod s;
  ControllerHarness& h = s.h;
  ASSERT_TRUE(h.runUntil([&] { return throttled(h) == 2; }, 600s));
  s.a->host->failingStops.clear();  // the app recovers
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, kBackoff + 60s))
      << "the shard did not move once its backoff had passed";
  EXPECT_EQ(h.counts()["a"], 1);
  EXPECT_EQ(h.counts()["b"], 1);
  // The shard that moved is no longer counted; the one a keeps (the map is balanced without
  // moving it) is until its own backoff has passed.
  EXPECT_EQ(throttled(h), 1);
  ASSERT_TRUE(h.runUntil([&] { return throttled(h) == 0; }, kBackoff + 30s));
  EXPECT_EQ(throttleEvents(h).size(), 2u);
}

TEST(HandoffThrottling, ALimitOfZeroNeverThrottles) {
  StuckPod s(0);
  ControllerHarness& h = s.h;
  h.run(300s);
  // A round about every 18 s (5 s handoff timeout, 3 s ping slack, 10 s retry), each one trying.
  EXPECT_GE(s.a->unassigns, 12);
  EXPECT_EQ(throttled(h), 0);
  EXPECT_TRUE(throttleEvents(h).empty());
}

TEST(HandoffThrottling, AThrottledShardStillLeavesAPodThatUnregisters) {
  StuckPod s;
  ControllerHarness& h = s.h;
  ASSERT_TRUE(h.runUntil([&] { return throttled(h) == 2; }, 600s));
  // The app can stop its entities now, but both shards are in their backoff: the drain does
  // not ask the planner, and the shards are placed at once.
  s.a->host->failingStops.clear();
  const SteadyTime start = h.scheduler.clock().now();
  EXPECT_EQ(h.unregisterPod("a"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.counts()["b"] == 2 && h.converged(); }, 10s))
      << "the shards of the leaving pod waited for their backoff";
  EXPECT_LT(h.scheduler.clock().now() - start, kBackoff);
  EXPECT_TRUE(s.a->held().empty());
}

TEST(HandoffThrottling, AThrottledShardOfADeadPodIsPlacedAtOnce) {
  StuckPod s;
  ControllerHarness& h = s.h;
  ASSERT_TRUE(h.runUntil([&] { return throttled(h) == 2; }, 600s));
  const SteadyTime start = h.scheduler.clock().now();
  h.killPod("a");
  ASSERT_TRUE(h.runUntil([&] { return h.counts().count("a") == 0 && h.counts()["b"] == 2; }, 10s))
      << "the shards of the dead pod waited for their backoff";
  EXPECT_LT(h.scheduler.clock().now() - start, kBackoff);
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 10s));
  EXPECT_EQ(throttled(h), 0);
}

}  // namespace
}  // namespace kshard::manager::testing
