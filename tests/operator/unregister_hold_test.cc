// The unregister hold's decision (operator/unregister_hold.h): which pods count as starting, when
// a terminating pod is held, and how long at most.
#include "operator/unregister_hold.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

const WallTime kDeleted = WallTime{} + std::chrono::hours(24 * 365 * 56);

sharding::ShardMap mapWith(std::vector<sharding::RegisteredPod> registered) {
  sharding::ShardMap map;
  map.spec.shards = 30;
  map.spec.handoffTimeout = 30s;
  map.spec.pingTimeout = 3s;
  map.status.pods = std::move(registered);
  return map;
}

sharding::RegisteredPod registered(const std::string& name, const std::string& version) {
  return {name, "uid-" + name, "10.0.0.1:7101", version, 0, "inc-" + name, {}};
}

PodInfo pod(const std::string& name, const std::string& version) {
  PodInfo p;
  p.namespace_ = "demo";
  p.name = name;
  p.uid = "uid-" + name;
  p.phase = "Running";
  p.labels = {{"kshard.io/shard-map", "counter"}, {"app.kubernetes.io/version", version}};
  return p;
}

// `p` deleted at kDeleted with a grace period of `grace`.
PodInfo deleted(PodInfo p, std::chrono::seconds grace) {
  p.terminating = true;
  p.deletionTimestamp = kDeleted + grace;
  p.deletionGracePeriodSeconds = grace.count();
  return p;
}

TEST(StartingVersions, CountsAliveUnregisteredPodsThatAreNotTerminating) {
  const auto map = mapWith({registered("old-a", "1.0.0"), registered("new-a", "2.0.0")});
  PodInfo failed = pod("new-failed", "2.0.0");
  failed.phase = "Failed";
  PodInfo succeeded = pod("new-done", "2.0.0");
  succeeded.phase = "Succeeded";
  PodInfo replaced = pod("old-a", "3.0.0");  // same name, another uid: a new pod, not registered
  replaced.uid = "uid-old-a-2";
  PodInfo unlabelled = pod("new-unlabelled", "");
  unlabelled.labels.erase("app.kubernetes.io/version");
  const std::vector<PodInfo> pods = {pod("old-a", "1.0.0"),
                                     pod("new-a", "2.0.0"),
                                     pod("new-b", "2.0.0"),
                                     deleted(pod("new-c", "2.0.0"), 30s),
                                     failed,
                                     succeeded,
                                     replaced,
                                     unlabelled};
  EXPECT_EQ(startingVersions(map, pods), (std::vector<std::string>{"2.0.0", "3.0.0", ""}));
}

TEST(StartingVersions, ReadsTheMapsVersionLabel) {
  auto map = mapWith({});
  map.spec.versionLabel = "example.com/release";
  PodInfo p = pod("new-a", "2.0.0");
  p.labels["example.com/release"] = "7";
  EXPECT_EQ(startingVersions(map, {p}), (std::vector<std::string>{"7"}));
}

TEST(UnregisterHold, HoldsATerminatingPodWhileNewerPodsStart) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  const auto hold = unregisterHold(map, map.status.pods[0], deleted(pod("old-a", "1.0.0"), 105s),
                                   {"2.0.0", "2.0.0", "1.0.0", "2.1.0"}, 60s, kDeleted + 5s);
  ASSERT_TRUE(hold.has_value());
  EXPECT_EQ(hold->startingPods, 3);  // the 1.0.0 pod is a replacement, not a newer version
  EXPECT_EQ(hold->version, "2.1.0");
  // The grace period (105 s) leaves room for the whole hold: it ends 60 s after the delete.
  EXPECT_EQ(hold->until, kDeleted + 60s);
}

TEST(UnregisterHold, EndsEarlyEnoughForTheHandoffBeforeTheKubeletKillsThePod) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  // Grace 45 s: the pod is killed at +45 s; the handoff (30 s), the ping (3 s) and the margin
  // (2 s) must fit before that, so the hold ends at +10 s.
  const auto observed = deleted(pod("old-a", "1.0.0"), 45s);
  const auto hold = unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted);
  ASSERT_TRUE(hold.has_value());
  EXPECT_EQ(hold->until, kDeleted + 10s);
  EXPECT_TRUE(
      unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted + 9s).has_value());
  EXPECT_FALSE(unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted + 10s)
                   .has_value());
}

TEST(UnregisterHold, EndsAtTheMaximumAfterTheDelete) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  const auto observed = deleted(pod("old-a", "1.0.0"), 600s);
  EXPECT_TRUE(unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted + 59s)
                  .has_value());
  EXPECT_FALSE(unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted + 60s)
                   .has_value());
}

TEST(UnregisterHold, NoHoldWithoutANewerVersionStartingOnceReplacementsWouldBeSeen) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  const auto observed = deleted(pod("old-a", "1.0.0"), 105s);
  const WallTime settled = kDeleted + kReplacementSettle;
  // A scale-down, or replacements of the same version.
  EXPECT_FALSE(unregisterHold(map, map.status.pods[0], observed, {}, 60s, settled).has_value());
  EXPECT_FALSE(unregisterHold(map, map.status.pods[0], observed, {"1.0.0", "0.9.0", ""}, 60s,
                              settled)
                   .has_value());
}

TEST(UnregisterHold, RightAfterTheDeleteWaitsForReplacementsToBeSeen) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  const auto observed = deleted(pod("old-a", "1.0.0"), 105s);
  // The ReplicaSet's new pod may not be in the informer yet: held until the settle time.
  const auto hold = unregisterHold(map, map.status.pods[0], observed, {}, 60s, kDeleted + 1s);
  ASSERT_TRUE(hold.has_value());
  EXPECT_EQ(hold->startingPods, 0);
  EXPECT_EQ(hold->until, kDeleted + kReplacementSettle);
  // Once the new pod shows, the hold is for it (and longer).
  const auto forNew =
      unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted + 1s);
  ASSERT_TRUE(forNew.has_value());
  EXPECT_EQ(forNew->startingPods, 1);
  EXPECT_EQ(forNew->until, kDeleted + 60s);
  // Without the grace period the delete's time is unknown: no settle.
  PodInfo noGrace = observed;
  noGrace.deletionGracePeriodSeconds.reset();
  EXPECT_FALSE(unregisterHold(map, map.status.pods[0], noGrace, {}, 60s, kDeleted + 1s));
  // The settle never outlasts the kubelet's deadline either.
  const auto tight = deleted(pod("old-a", "1.0.0"), 37s);  // killed at +37: hold until +2
  const auto shortHold = unregisterHold(map, map.status.pods[0], tight, {}, 60s, kDeleted + 1s);
  ASSERT_TRUE(shortHold.has_value());
  EXPECT_EQ(shortHold->until, kDeleted + 2s);
}

TEST(UnregisterHold, OnlyATerminatingPodIsHeld) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  const auto& leaving = map.status.pods[0];
  // A drain asked by hand: the pod is not being deleted, so there is no deadline to hold to.
  EXPECT_FALSE(unregisterHold(map, leaving, pod("old-a", "1.0.0"), {"2.0.0"}, 60s, kDeleted));
  // Not in the API at all.
  EXPECT_FALSE(unregisterHold(map, leaving, std::nullopt, {"2.0.0"}, 60s, kDeleted));
  // Another pod under the same name.
  PodInfo other = deleted(pod("old-a", "1.0.0"), 105s);
  other.uid = "uid-other";
  EXPECT_FALSE(unregisterHold(map, leaving, other, {"2.0.0"}, 60s, kDeleted));
  // Terminating, but the deletion time is unknown.
  PodInfo unknown = deleted(pod("old-a", "1.0.0"), 105s);
  unknown.deletionTimestamp.reset();
  EXPECT_FALSE(unregisterHold(map, leaving, unknown, {"2.0.0"}, 60s, kDeleted));
}

TEST(UnregisterHold, ZeroMaximumTurnsTheHoldOff) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  EXPECT_FALSE(unregisterHold(map, map.status.pods[0], deleted(pod("old-a", "1.0.0"), 105s),
                              {"2.0.0"}, 0s, kDeleted));
}

TEST(UnregisterHold, WithoutTheGracePeriodTheKubeletsDeadlineStillBoundsIt) {
  const auto map = mapWith({registered("old-a", "1.0.0")});
  PodInfo observed = deleted(pod("old-a", "1.0.0"), 50s);
  observed.deletionGracePeriodSeconds.reset();
  const auto hold = unregisterHold(map, map.status.pods[0], observed, {"2.0.0"}, 60s, kDeleted);
  ASSERT_TRUE(hold.has_value());
  EXPECT_EQ(hold->until, kDeleted + 15s);  // 50 - 30 - 3 - 2
}

}  // namespace
}  // namespace kshard::manager
