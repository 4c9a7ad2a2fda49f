// The decisions about dead pods (operator/pod_health_monitor.h): what an API answer shows, which
// dead pods leave the map, at which epoch, and when a dead pod's shards may be taken.
#include "operator/pod_health_monitor.h"

#include <gtest/gtest.h>

#include "operator/ownership_leases.h"

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

PodInfo running(const std::string& uid) {
  PodInfo p;
  p.name = "a";
  p.uid = uid;
  p.phase = "Running";
  return p;
}

TEST(Inspection, AnApiErrorProvesNothing) {
  const auto i = inspection(StatusOr<std::optional<PodInfo>>(unavailable("down")), "u1");
  EXPECT_EQ(i.health, PodHealth::kAlive);
  EXPECT_FALSE(i.observed);
}

TEST(Inspection, GoneOrReplacedIsDeadAndOnlyTheRegisteredPodIsObserved) {
  EXPECT_EQ(inspection(std::optional<PodInfo>(), "u1").health, PodHealth::kDead);
  const auto replaced = inspection(std::optional<PodInfo>(running("u2")), "u1");
  EXPECT_EQ(replaced.health, PodHealth::kDead);
  EXPECT_FALSE(replaced.observed);
  const auto same = inspection(std::optional<PodInfo>(running("u1")), "u1");
  EXPECT_EQ(same.health, PodHealth::kAlive);
  ASSERT_TRUE(same.observed);
  EXPECT_EQ(same.observed->uid, "u1");
}

// Pods a (shards 1-2), b (none), c (3-4) of 4 shards.
struct ThreePods {
  sharding::ShardMap map;
  sharding::ShardTable table{4};
  ThreePods() {
    map.spec.shards = 4;
    map.status.pods = {{"a", "ua", "x:1", "1", 2, "", {}},
                       {"b", "ub", "x:2", "1", 0, "", {}},
                       {"c", "uc", "x:3", "1", 2, "", {}}};
    table.assign(1, 0, 1);
    table.assign(2, 0, 1);
    table.assign(3, 2, 1);
    table.assign(4, 2, 1);
  }
};

TEST(DropDeadPods, DropsTheDeadUnlessAPodWithShardsMayStillRun) {
  ThreePods m;
  std::map<std::string, Inspection> seen{{"a", {PodHealth::kDead, std::nullopt}},
                                         {"b", {PodHealth::kDead, std::nullopt}},
                                         {"c", {PodHealth::kDead, std::nullopt}}};
  std::vector<std::string> asked;
  const auto dropped = dropDeadPods(m.map, m.table, seen, [&](const auto& pod, const auto&) {
    asked.push_back(pod.name);
    return pod.name == "c";  // c may still run
  });
  EXPECT_EQ(asked, (std::vector<std::string>{"c", "a"})) << "b has no shards: not asked";
  ASSERT_EQ(dropped.pods.size(), 2u);
  EXPECT_EQ(dropped.pods[0].name, "b");
  EXPECT_EQ(dropped.pods[1].name, "a");
  EXPECT_TRUE(dropped.hadShards);
  ASSERT_EQ(m.map.status.pods.size(), 1u);
  EXPECT_EQ(m.map.status.pods[0].name, "c");
  EXPECT_EQ(m.table.shardsOf(0).size(), 2) << "c keeps its shards, renumbered";
  EXPECT_EQ(m.table.unassigned().size(), 2);
}

TEST(DropDeadPods, AliveAndTerminatingPodsStay) {
  ThreePods m;
  std::map<std::string, Inspection> seen{{"a", {PodHealth::kAlive, std::nullopt}},
                                         {"b", {PodHealth::kTerminating, std::nullopt}}};
  const auto dropped = dropDeadPods(m.map, m.table, seen, [](const auto&, const auto&) {
    ADD_FAILURE() << "asked about a pod that is not dead";
    return false;
  });
  EXPECT_TRUE(dropped.pods.empty());
  EXPECT_FALSE(dropped.hadShards);
  EXPECT_EQ(m.map.status.pods.size(), 3u);
}

TEST(EpochAfterRemoval, NewWhenOwnersChangeOrAFenceIsUncovered) {
  EXPECT_EQ(epochAfterRemoval(5, 0, false), 5);
  EXPECT_EQ(epochAfterRemoval(5, 5, false), 5);
  EXPECT_EQ(epochAfterRemoval(5, 0, true), 6);
  EXPECT_EQ(epochAfterRemoval(5, 6, false), 6);
  EXPECT_EQ(epochAfterRemoval(5, 8, true), 8);
}

const SteadyTime kNow = SteadyTime{} + 1h;

RemovalFacts vanished() {
  RemovalFacts f;
  f.key = leaseKey("a", "u1");
  f.lease = 10s;
  f.termStart = kNow - 1h;
  f.now = kNow;
  return f;
}

PodInfo terminated() {
  PodInfo p = running("u1");
  p.phase = "Succeeded";
  p.containersTerminated = true;
  return p;
}

TEST(DecideRemoval, ConfirmedTerminationOrAReleaseIsNow) {
  LeaseFacts facts;
  RemovalFacts f = vanished();
  f.lastState = terminated();
  EXPECT_EQ(decideRemoval(facts, f).kind, RemovalDecision::Kind::kNow);
  EXPECT_TRUE(facts.deathSeen.empty());
  f.lastState.reset();
  facts.released.insert(f.key);
  EXPECT_EQ(decideRemoval(facts, f).kind, RemovalDecision::Kind::kNow);
}

TEST(DecideRemoval, AConfirmationOlderThanTheSidecarsLastWordIsWaitedOut) {
  LeaseFacts facts;
  facts.staleTermination.insert(leaseKey("a", "u1"));
  RemovalFacts f = vanished();
  f.lastState = terminated();
  const auto d = decideRemoval(facts, f);
  EXPECT_EQ(d.kind, RemovalDecision::Kind::kWaitForLease);
  EXPECT_TRUE(d.firstSeen);
}

TEST(DecideRemoval, AFinishedPodWhoseObjectStaysIsLookedAtAgainAfterALease) {
  LeaseFacts facts;
  RemovalFacts f = vanished();
  PodInfo failed = running("u1");
  failed.phase = "Failed";
  f.lastState = failed;
  f.observed = true;
  const auto d = decideRemoval(facts, f);
  EXPECT_EQ(d.kind, RemovalDecision::Kind::kRecheck);
  EXPECT_EQ(d.at, kNow + 10s);
  EXPECT_TRUE(facts.deathSeen.empty()) << "the pod may still renew: not counted as vanished";
}

TEST(DecideRemoval, AVanishedPodWaitsUntilItsLeaseIsSurelyOver) {
  LeaseFacts facts;
  RemovalFacts f = vanished();
  facts.grants[f.key] = kNow - 1s;
  const auto first = decideRemoval(facts, f);
  ASSERT_EQ(first.kind, RemovalDecision::Kind::kWaitForLease);
  EXPECT_TRUE(first.firstSeen);
  EXPECT_EQ(first.at, leaseSurelyOver({f.lease, kNow - 1s, f.termStart, kNow}));
  f.now = first.at - 1ms;
  const auto again = decideRemoval(facts, f);
  EXPECT_EQ(again.kind, RemovalDecision::Kind::kWaitForLease);
  EXPECT_FALSE(again.firstSeen);
  EXPECT_EQ(again.at, first.at) << "counted from when it was first found dead";
  f.now = first.at;
  EXPECT_EQ(decideRemoval(facts, f).kind, RemovalDecision::Kind::kNow);
}

}  // namespace
}  // namespace kshard::manager
