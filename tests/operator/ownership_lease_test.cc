// The pods' ownership leases on the operator's side (operator/ownership_leases.h): renewals,
// and when the shards of a dead pod move. Run by the controller harness, whose stub pods keep
// their registry's lease renewed as a sidecar does, and whose invariant (checked after every
// event) counts a pod's owned shards as served only while its lease runs: a shard given to
// another pod while the old owner may still serve it fails the test.
#include <gtest/gtest.h>

#include <chrono>

#include "operator/ownership_leases.h"
#include "tests/operator/controller_harness.h"

namespace kshard::manager::testing {
namespace {

using namespace std::chrono_literals;

void startBalanced(ControllerHarness& h, const std::vector<std::string>& names) {
  h.lead();
  for (const auto& n : names) {
    h.startPod(n);
    ASSERT_EQ(h.registerPod(n), 200) << n;
  }
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s)) << "the map did not converge";
}

std::size_t storedShards(const ControllerHarness& h, const std::string& pod) {
  const auto counts = h.counts();
  auto it = counts.find(pod);
  return it == counts.end() ? 0 : static_cast<std::size_t>(it->second);
}

http::Response renew(ControllerHarness& h, const StubPod& pod, std::string incarnation = "") {
  protocol::Target t{pod.name, pod.uid, incarnation.empty() ? pod.incarnation : incarnation};
  return h.call([&](Reply reply) { h.controller().renew(t, std::move(reply)); });
}

TEST(OwnershipLease, TheBoundCountsTheLastGrantTheVanishingAndThePreviousLeadersGrace) {
  const SteadyTime t0{};
  const Duration lease = 30s;
  const Duration margin = leaseMargin(lease);
  // A term begun long ago: the last grant and the vanishing decide.
  EXPECT_EQ(leaseSurelyOver({lease, t0 + 510s, t0, t0 + 490s}), t0 + 510s + lease + margin);
  // The API server may take the vanished pod's token for kApiConfirmationLag more.
  EXPECT_EQ(leaseSurelyOver({lease, t0 + 480s, t0, t0 + 490s}),
            t0 + 490s + kApiConfirmationLag + lease + margin);
  // A term begun just now: a previous leader may have granted renewals for its grace.
  EXPECT_EQ(leaseSurelyOver({lease, std::nullopt, t0 + 490s, t0 + 491s}),
            t0 + 490s + graceWithoutApi(lease) + lease + margin);
}

TEST(OwnershipLease, RenewIsGrantedToTheRegisteredProcessOfALivePodOnly) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  EXPECT_EQ(renew(h, a).status, 200);
  const auto other = renew(h, a, "a-restarted");
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_NE(other.body.find("WrongTarget"), std::string::npos) << other.body;
  StubPod& ghost = h.startPod("ghost");
  EXPECT_EQ(renew(h, ghost).status, 404) << "an unregistered pod's lease was renewed";
  // Once its object is gone, the pod's lease is never renewed again.
  h.directory.forceDelete("a");
  h.controller().podChanged("a");
  h.run(1s);
  EXPECT_EQ(renew(h, a).status, 404);
}

TEST(OwnershipLease, AReplicaThatLostTheLeaseRenewsOnlyForItsGraceUntilSomeoneElseLeads) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  // The API server is down: the leader cannot renew the Lease and steps down.
  auto& leadership = h.replica().leadership;
  leadership.renewedAt = h.scheduler.clock().now();
  h.loseLease();
  h.run(10s);
  EXPECT_EQ(renew(h, a).status, 200) << "pods would stop serving during an API server outage";
  h.run(graceWithoutApi(30s));
  EXPECT_EQ(renew(h, a).status, 503) << "renewed past the grace";
  leadership.renewedAt = h.scheduler.clock().now();
  leadership.deposedFlag = true;  // another replica was seen holding the Lease
  EXPECT_EQ(renew(h, a).status, 503) << "renewed while another replica may lead";
}

// A leader frozen past its term thaws with its leading flag still set (the elector's timer that
// clears it has not run yet): its last renewal of the Lease decides, not the flag.
TEST(OwnershipLease, AThawedLeaderWithAStaleFlagDoesNotRenew) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  auto& leadership = h.replica().leadership;
  EXPECT_EQ(renew(h, a).status, 200);
  leadership.renewedAt = h.scheduler.clock().now();
  leadership.renewing = false;
  h.scheduler.manualClock().advance(graceWithoutApi(30s) + 1s);  // frozen: nothing ran
  ASSERT_TRUE(leadership.isLeader());
  EXPECT_EQ(renew(h, a).status, 503) << "a stale leader renewed past its last Lease renewal's grace";
}

TEST(OwnershipLease, AVanishedPodWhoseSidecarAnswersReleasesItsShardsAtOnce) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  // A force delete: the object goes, the containers are not reported terminated and still run.
  h.directory.forceDelete("a");
  h.controller().podChanged("a");
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 10s))
      << "the shards of a vanished pod that released them did not move at once";
  EXPECT_TRUE(h.pods.find("a")->held().empty()) << "the vanished pod still serves";
  EXPECT_EQ(h.counts().count("a"), 0u);
  EXPECT_GT(h.invariantChecks(), 0);
}

TEST(OwnershipLease, AVanishedPodThatDoesNotAnswerKeepsItsShardsUntilItsLeaseHasRunOut) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  const std::size_t held = storedShards(h, "a");
  ASSERT_GT(held, 0u);
  // The node is cut off and the pod removed (a force delete, or a lost node's pods): its
  // processes may still run, and nothing reaches them.
  a.pingFault = a.assignFault = a.unassignFault = a.renewFault = Fault::kDropRequest;
  h.directory.forceDelete("a");
  h.controller().podChanged("a");
  // Its last renewal was less than a quarter of a lease ago: its lease may run for three quarters
  // more, and the shards stay with it at least that long. (The invariant, checked at every
  // event, fails the test if another pod got them while a's lease ran.)
  h.run(30s);
  EXPECT_EQ(storedShards(h, "a"), held) << "the shards moved while the pod's lease may run";
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 60s))
      << "the shards did not move once the lease had surely run out";
  EXPECT_TRUE(a.held().empty()) << "the pod did not fence itself when its lease ran out";
  EXPECT_EQ(h.events.count("PodVanished"), 1);
}

TEST(OwnershipLease, AfterALeaderChangeAVanishedPodAlsoWaitsForThePreviousLeadersGrace) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  a.pingFault = a.assignFault = a.unassignFault = a.renewFault = Fault::kDropRequest;
  // Another replica takes over; the old one may have renewed a's lease until its grace ended.
  h.loseLease(0);
  h.addReplica("kshard-operator-1");
  h.lead(1);
  const SteadyTime termStart = h.scheduler.clock().now();
  h.directory.forceDelete("a");
  h.controller(1).podChanged("a");
  const auto waited = [&] { return h.scheduler.clock().now() - termStart; };
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 400s));
  EXPECT_GE(waited(), graceWithoutApi(30s) + 30s) << "moved within the previous leader's grace";
}

// A round that pinged the vanished pod before its release, and whose status write is slow,
// would re-send it the shards the release took: the removal that follows the release would then
// move shards the pod holds again. A pod found dead gets no assign.
TEST(OwnershipLease, ARoundRunningDuringTheReleaseDoesNotGiveTheShardsBack) {
  ControllerHarness h(30, [](sharding::ShardMapSpec& s) { s.rebalanceInterval = 2s; });
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  a.host->stopLatency = 5s;
  for (sharding::ShardId s = 1; s <= 30; ++s) h.pods.touch("a", s, "e" + std::to_string(s));
  h.run(100ms);
  const int before = a.unassigns;
  h.directory.forceDelete("a");
  h.controller().podChanged("a");
  ASSERT_TRUE(h.runUntil([&] { return a.unassigns > before; }, 5s)) << "no release was sent";
  h.store.holdWrites = true;  // a slow status write holds a round at its persist
  ASSERT_TRUE(h.runUntil([&] { return !h.store.held.empty(); }, 10s));
  h.run(6s);  // the release is acknowledged meanwhile
  h.store.holdWrites = false;
  auto held = std::move(h.store.held);
  h.store.held.clear();
  for (auto& f : held) f();
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 30s));
  EXPECT_TRUE(a.held().empty()) << "the released pod got its shards back";
}

TEST(OwnershipLease, APodWhoseEndTheKubeletConfirmedLosesItsShardsAtOnce) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  a.pingFault = a.assignFault = a.unassignFault = a.renewFault = Fault::kDropRequest;
  h.killPod("a");  // the kubelet reported every container terminated, then the object went
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 5s))
      << "a confirmed end did not move the shards at once";
}

// The kubelet reported every container terminated, restarted them, and could not report that
// (its node lost the API server); the restarted sidecar renewed. When the object then goes (the
// pod garbage collector after the Node is deleted), its last status says terminated, but the
// sidecar spoke since: that is no confirmation, and the shards wait for the lease.
TEST(OwnershipLease, ATerminatedStatusOlderThanTheSidecarsLastRenewConfirmsNothing) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  const std::size_t held = storedShards(h, "a");
  ASSERT_GT(held, 0u);
  h.directory.find("a")->containersTerminated = true;
  ASSERT_EQ(renew(h, a).status, 200);
  a.pingFault = a.assignFault = a.unassignFault = a.renewFault = Fault::kDropRequest;
  h.directory.erase("a");  // the final state: terminating, every container terminated
  h.controller().podChanged("a");
  h.run(20s);
  EXPECT_EQ(storedShards(h, "a"), held) << "a stale status moved the shards while the lease ran";
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 60s))
      << "the shards did not move once the lease had surely run out";
}

// The same stale status on an object that stays (a Failed pod is kept): its shards move once the
// lease has surely run out, not never.
TEST(OwnershipLease, AStaleConfirmationOnAKeptObjectIsWaitedOutLikeAVanishing) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  h.directory.find("a")->containersTerminated = true;
  ASSERT_EQ(renew(h, a).status, 200);
  a.pingFault = a.assignFault = a.unassignFault = a.renewFault = Fault::kDropRequest;
  h.directory.find("a")->phase = "Failed";
  h.controller().podChanged("a");
  EXPECT_EQ(renew(h, a).status, 404) << "a finished pod's lease was renewed";
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 120s))
      << "the shards of a pod with a stale confirmation never moved";
}

TEST(OwnershipLease, AFinishedPodWithoutConfirmationKeepsItsShardsWhileItsObjectExists) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  a.pingFault = a.assignFault = a.unassignFault = Fault::kDropRequest;
  // Marked Failed by a controller (not the kubelet): the containers may still run, and the API
  // server still takes the pod's token, so its lease may still be renewed.
  h.directory.find("a")->phase = "Failed";
  h.controller().podChanged("a");
  h.run(300s);
  EXPECT_GT(storedShards(h, "a"), 0u);
  h.directory.forceDelete("a");
  h.controller().podChanged("a");
  ASSERT_TRUE(h.runUntil([&] { return storedShards(h, "b") == 30; }, 120s))
      << "the shards did not move once the object was gone and the lease had run out";
}

TEST(OwnershipLease, ANewPodOfTheSameNameWaitsForTheVanishedOnesLease) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& old = *h.pods.find("a");
  old.pingFault = old.assignFault = old.unassignFault = old.renewFault = Fault::kDropRequest;
  const std::string oldUid = old.uid;
  // A StatefulSet recreates a force-deleted pod under the same name.
  PodInfo next = *h.directory.find("a");
  next.uid = "uid-a-2";
  h.directory.forceDelete("a");
  h.directory.put(next);
  h.pods.kill("a");
  StubPod& fresh = h.pods.add("a", "uid-a-2", old.address, "1.0.0");
  EXPECT_EQ(h.registerPod("a"), 503) << "the new pod replaced one that may still run";
  ASSERT_TRUE(h.runUntil([&] { return h.registerPod("a") == 200; }, 400s));
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 400s));
  EXPECT_FALSE(fresh.held().empty());
  EXPECT_NE(h.stored().status.pods[0].uid, oldUid);
}

}  // namespace
}  // namespace kshard::manager::testing
