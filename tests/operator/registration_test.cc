// Registration's decisions (operator/registration.h): who may register, and what recording a
// batch of registrations does to the map.
#include "operator/registration.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

const protocol::ShardMapRef kRef{"demo", "counter"};

protocol::RegisterRequest request(const std::string& pod, const std::string& uid) {
  protocol::RegisterRequest r;
  r.pod = pod;
  r.uid = uid;
  r.address = "10.0.0.7:7101";
  r.version = "2.0.0";
  r.incarnation = "inc-" + uid;
  return r;
}

PodInfo alive(const std::string& name, const std::string& uid) {
  PodInfo p;
  p.namespace_ = "demo";
  p.name = name;
  p.uid = uid;
  p.phase = "Running";
  p.podIp = "10.0.0.7";
  p.labels = {{kShardMapLabel, "counter"}};
  return p;
}

TEST(RegisterRefusal, AnAlivePodOfTheMapAtItsOwnIpMayRegister) {
  EXPECT_FALSE(registerRefusal(kRef, alive("a", "u1"), request("a", "u1")));
  auto v6 = request("a", "u1");
  v6.address = "[fd00::7]:7101";
  auto pod = alive("a", "u1");
  pod.podIp = "fd00::7";
  EXPECT_FALSE(registerRefusal(kRef, pod, v6));
}

TEST(RegisterRefusal, EachReasonHasItsStatusAndCode) {
  const auto r = request("a", "u1");
  auto refused = [&](std::optional<PodInfo> pod) { return registerRefusal(kRef, pod, r); };
  EXPECT_EQ(refused(std::nullopt)->status, 404);
  auto other = alive("a", "u0");
  EXPECT_EQ(refused(other)->status, 403);
  EXPECT_EQ(refused(other)->code, protocol::errors::kPodNotAlive);
  auto finished = alive("a", "u1");
  finished.phase = "Succeeded";
  EXPECT_EQ(refused(finished)->code, protocol::errors::kPodNotAlive);
  auto terminating = alive("a", "u1");
  terminating.terminating = true;
  EXPECT_EQ(refused(terminating)->code, protocol::errors::kPodNotAlive);
  auto unlabelled = alive("a", "u1");
  unlabelled.labels.clear();
  EXPECT_EQ(refused(unlabelled)->code, protocol::errors::kForbidden);
  auto noIp = alive("a", "u1");
  noIp.podIp.clear();
  EXPECT_EQ(refused(noIp)->code, protocol::errors::kForbidden);
  auto elsewhere = alive("a", "u1");
  elsewhere.podIp = "10.0.0.8";
  EXPECT_EQ(refused(elsewhere)->code, protocol::errors::kForbidden);
}

// Pod "a" (uid u0) owns shards 1-4 of 6 at epoch 5.
struct MapWithA {
  sharding::ShardMap map;
  sharding::ShardTable table{6};
  MapWithA() {
    map.spec.shards = 6;
    map.status.epoch = 5;
    map.status.pods = {{"a", "u0", "10.0.0.1:7101", "1.0.0", 4, "inc-old", {}}};
    for (sharding::ShardId s = 1; s <= 4; ++s) table.assign(s, 0, 5);
  }
};

TEST(ApplyRegistrations, TheSamePodAgainKeepsItsShardsWithItsNewIncarnation) {
  MapWithA m;
  auto again = request("a", "u0");
  int asked = 0;
  auto out = applyRegistrations(m.map, m.table, {again}, 0, [&](const auto&) {
    ++asked;
    return false;
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].sameUid);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(m.map.status.pods[0].incarnation, "inc-u0");
  EXPECT_EQ(m.map.status.pods[0].address, "10.0.0.7:7101");
  EXPECT_EQ(m.table.shardsOf(0).size(), 4);
  EXPECT_EQ(m.map.status.epoch, 5) << "nothing changed hands";
}

TEST(ApplyRegistrations, AReplacementWaitsWhileTheOldPodMayRun) {
  MapWithA m;
  auto out = applyRegistrations(m.map, m.table, {request("a", "u1")}, 0,
                                [](const auto& pod) { return pod.uid == "u0"; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].deferred);
  ASSERT_EQ(m.map.status.pods.size(), 1u);
  EXPECT_EQ(m.map.status.pods[0].uid, "u0") << "the old pod keeps its shards";
  EXPECT_EQ(m.table.shardsOf(0).size(), 4);
  EXPECT_EQ(m.map.status.epoch, 5);
}

TEST(ApplyRegistrations, AReplacementTakesTheOldPodsPlaceAtANewEpochAboveTheFence) {
  MapWithA m;
  auto out = applyRegistrations(m.map, m.table, {request("a", "u1"), request("b", "u2")}, 9,
                                [](const auto&) { return false; });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].replaced, "u0");
  EXPECT_TRUE(out[1].replaced.empty());
  ASSERT_EQ(m.map.status.pods.size(), 2u);
  EXPECT_EQ(m.map.status.pods[0].uid, "u1");
  EXPECT_EQ(m.map.status.pods[1].name, "b");
  EXPECT_EQ(m.table.unassigned().size(), 6) << "the old pod's shards are unassigned";
  // Epoch rules 1 and 3: the owners changed, and an unassign went out at 9.
  EXPECT_EQ(m.map.status.epoch, 9);
}

TEST(ApplyRegistrations, ReplacingAPodWithoutShardsKeepsTheEpoch) {
  MapWithA m;
  m.table = sharding::ShardTable(6);
  int asked = 0;
  applyRegistrations(m.map, m.table, {request("a", "u1")}, 0, [&](const auto&) {
    ++asked;
    return true;
  });
  EXPECT_EQ(asked, 0) << "only a pod with shards may hold its replacement back";
  EXPECT_EQ(m.map.status.pods[0].uid, "u1");
  EXPECT_EQ(m.map.status.epoch, 5);
}

}  // namespace
}  // namespace kshard::manager
