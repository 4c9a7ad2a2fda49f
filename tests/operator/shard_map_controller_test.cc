// Component tests of the Shard Manager: the rebalance workflow of DESIGN.md run against stub pods
// (real sidecar::EntityRegistry fences behind a fake PodClient), a fake store with optimistic
// concurrency and a fake health API, all on simulated time. The harness checks after every event
// that no shard is served by two pods and that no pod serves a shard the stored map gives to
// another (ControllerHarness::checkInvariant).
#include "operator/shard_map_controller.h"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/operator/controller_harness.h"

namespace kshard::manager::testing {
namespace {

using namespace std::chrono_literals;

// Started, led, with `names` registered and converged.
void startBalanced(ControllerHarness& h, const std::vector<std::string>& names,
                   const std::string& version = "1.0.0") {
  h.lead();
  for (const auto& n : names) {
    h.startPod(n, version);
    ASSERT_EQ(h.registerPod(n), 200) << n;
  }
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s))
      << "the map did not converge; counts: " << h.counts().size();
}

std::set<sharding::ShardId> shardsOf(const ControllerHarness& h, const std::string& pod) {
  auto m = h.stored();
  auto t = h.storedTable();
  std::set<sharding::ShardId> out;
  for (std::size_t i = 0; i < m.status.pods.size(); ++i) {
    if (m.status.pods[i].name != pod) continue;
    t.shardsOf(static_cast<sharding::PodIndex>(i)).forEach([&](auto s) { out.insert(s); });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Register

TEST(ShardMapController, TakeoverWritesManagerAndBumpsEpoch) {
  ControllerHarness h;
  h.lead();
  auto m = h.stored();
  ASSERT_TRUE(m.status.manager.has_value());
  EXPECT_EQ(m.status.manager->pod, "kshard-operator-0");
  EXPECT_EQ(m.status.manager->address, "10.0.0.1:7200");
  EXPECT_EQ(m.status.epoch, 1);
  EXPECT_EQ(h.conditionStatus("Ready"), "False");
}

TEST(ShardMapController, FirstRegisterGetsEveryShard) {
  ControllerHarness h(30);
  h.lead();
  StubPod& a = h.startPod("a");
  EXPECT_EQ(h.registerPod("a"), 200);
  ASSERT_TRUE(h.runUntil([&] { return a.held().size() == 30; }, 5s))
      << "the first pod did not get every shard at once";
  EXPECT_EQ(h.unassigned(), 0);
  EXPECT_EQ(h.counts()["a"], 30);
  EXPECT_EQ(h.conditionStatus("Ready"), "True");
  EXPECT_EQ(h.conditionStatus("Balanced"), "True");
  EXPECT_EQ(h.conditionStatus("Progressing"), "False");
  // Every shard at the epoch of the write that gave them, and the pod holds them at it.
  auto m = h.stored();
  ASSERT_EQ(m.status.assignments.size(), 1u);
  EXPECT_EQ(m.status.assignments[0].pod, "a");
  EXPECT_EQ(m.status.assignments[0].epoch, m.status.epoch);
  EXPECT_EQ(a.registry->ownedEpoch(1), static_cast<sidecar::Epoch>(m.status.epoch));
  EXPECT_EQ(h.events.count("PodRegistered"), 1);
  EXPECT_EQ(h.events.count("Rebalanced"), 1);
}

TEST(ShardMapController, RegisterOfPodUnknownToTheApiIsRefused) {
  ControllerHarness h;
  h.lead();
  h.pods.add("ghost", "uid-ghost", "10.9.9.9:7101", "1.0.0");
  protocol::RegisterRequest req{"ghost", "uid-ghost", "10.9.9.9:7101", "1.0.0", "inc"};
  http::Response r = h.call([&](Reply reply) { h.controller().registerPod(req, reply); });
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("PodNotAlive"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("does not exist"), std::string::npos) << r.body;
  EXPECT_TRUE(h.stored().status.pods.empty());
  EXPECT_EQ(h.events.count("RegisterRefused"), 1);
}

TEST(ShardMapController, RegisterWithAnotherUidIsRefused) {
  ControllerHarness h;
  h.lead();
  StubPod& a = h.startPod("a");
  // The API shows a newer pod of that name: the caller is a stale incarnation.
  h.directory.find("a")->uid = "uid-newer";
  protocol::RegisterRequest req{"a", a.uid, a.address, "1.0.0", a.incarnation};
  http::Response r = h.call([&](Reply reply) { h.controller().registerPod(req, reply); });
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("PodNotAlive"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("uid-newer"), std::string::npos) << r.body;
  EXPECT_TRUE(h.stored().status.pods.empty());
}

TEST(ShardMapController, RegisterOfAFinishedPodIsRefused) {
  ControllerHarness h;
  h.lead();
  h.startPod("a");
  h.directory.find("a")->phase = "Failed";
  EXPECT_EQ(h.registerPod("a"), 403);
  h.directory.find("a")->phase = "Succeeded";
  EXPECT_EQ(h.registerPod("a"), 403);
  EXPECT_TRUE(h.stored().status.pods.empty());
}

TEST(ShardMapController, RegisterOfAPodOfAnotherShardMapIsRefused) {
  ControllerHarness h;
  h.lead();
  h.startPod("a");
  h.directory.find("a")->labels[kShardMapLabel] = "other";
  EXPECT_EQ(h.registerPod("a"), 403);
  EXPECT_TRUE(h.stored().status.pods.empty());
}

TEST(ShardMapController, RegisterWithAnAddressOffThePodIpIsRefused) {
  ControllerHarness h;
  h.lead();
  StubPod& a = h.startPod("a");
  protocol::RegisterRequest req{"a", a.uid, "10.66.0.1:7101", "1.0.0", a.incarnation};
  http::Response r = h.call([&](Reply reply) { h.controller().registerPod(req, reply); });
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("10.66.0.1:7101"), std::string::npos) << r.body;
}

TEST(ShardMapController, RegisterShownAliveByTheCacheIsAdmittedWithoutAGet) {
  ControllerHarness h;
  h.lead();
  h.startPod("a");
  const int before = h.directory.fetches;
  EXPECT_EQ(h.registerPod("a"), 200);
  EXPECT_EQ(h.directory.fetches, before) << "the informer's cache already showed the pod";
  ASSERT_EQ(h.stored().status.pods.size(), 1u);
}

TEST(ShardMapController, RegisterOfAPodTheCacheDoesNotShowYetAsksTheApi) {
  ControllerHarness h;
  h.lead();
  h.startPod("a");
  h.directory.staleCache = std::map<std::string, PodInfo>{};  // the informer lags behind
  const int before = h.directory.fetches;
  EXPECT_EQ(h.registerPod("a"), 200);
  // (The round after it asks again: the lagging cache shows the pod gone.)
  EXPECT_GE(h.directory.fetches, before + 1);
  ASSERT_EQ(h.stored().status.pods.size(), 1u);
}

TEST(ShardMapController, RefusalFromAStaleCacheIsCheckedWithTheApi) {
  ControllerHarness h;
  h.lead();
  StubPod& a = h.startPod("a");
  // The cache still shows the previous incarnation; the API shows the caller.
  PodInfo old = *h.directory.find("a");
  old.uid = "uid-previous";
  h.directory.staleCache = std::map<std::string, PodInfo>{{"a", old}};
  EXPECT_EQ(h.registerPod("a"), 200);
  ASSERT_EQ(h.stored().status.pods.size(), 1u);
  EXPECT_EQ(h.stored().status.pods[0].uid, a.uid);
}

TEST(ShardMapController, UnassignedShardsGoOutBeforeQueuedRegistrations) {
  ControllerHarness h(30);
  h.lead();
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  for (const auto& n : names) h.startPod(n);
  // Every pod registers at once, as when a large Deployment starts.
  auto answers = std::make_shared<std::vector<int>>();
  for (const auto& n : names) {
    StubPod* pod = h.pods.find(n);
    h.controller().registerPod({pod->name, pod->uid, pod->address, pod->version, pod->incarnation},
                               [answers](http::Response r) { answers->push_back(r.status); });
  }
  ASSERT_TRUE(h.runUntil([&] { return answers->size() == names.size(); }, 60s))
      << "not every registration was answered";
  EXPECT_EQ(*answers, std::vector<int>(names.size(), 200));
  // The first write that left no shard unassigned came while registrations were still waiting.
  std::size_t registeredThen = 0;
  for (const auto& m : h.store.history) {
    if (m.status.unassignedCount == 0 && !m.status.pods.empty()) {
      registeredThen = m.status.pods.size();
      break;
    }
  }
  EXPECT_GE(registeredThen, 1u);
  EXPECT_LT(registeredThen, names.size())
      << "every shard stayed unassigned until the last pod had registered";
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, RegistrationsThatWaitTogetherAreWrittenTogether) {
  ControllerHarness h(30);
  h.lead();
  h.startPod("first");
  ASSERT_EQ(h.registerPod("first"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 60s));
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) names.push_back("p" + std::to_string(i));
  for (const auto& n : names) h.startPod(n);
  const int writesBefore = h.store.writes;
  // One pod registers twice at once (a restarted sidecar racing its first attempt).
  names.push_back("p0");
  auto answers = std::make_shared<std::vector<int>>();
  for (const auto& n : names) {
    StubPod* pod = h.pods.find(n);
    h.controller().registerPod({pod->name, pod->uid, pod->address, pod->version, pod->incarnation},
                               [answers](http::Response r) { answers->push_back(r.status); });
  }
  ASSERT_TRUE(h.runUntil([&] { return answers->size() == names.size(); }, 60s));
  EXPECT_EQ(*answers, std::vector<int>(names.size(), 200));
  // Every pod is listed once; the registrations took far fewer writes than pods.
  const auto m = h.stored();
  ASSERT_EQ(m.status.pods.size(), 21u);
  std::set<std::string> listed;
  for (const auto& p : m.status.pods) listed.insert(p.name);
  EXPECT_EQ(listed.size(), 21u);
  EXPECT_LE(h.store.writes - writesBefore, 6) << "registrations were not written together";
  EXPECT_EQ(h.events.count("PodRegistered"), 21);
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, ReplacementInABatchTakesTheOldIncarnationsShards) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b", "c"});
  const auto before = h.stored();
  // "b" comes back as a new pod while "d" starts: both wait in one batch.
  h.killPod("b");
  StubPod& b2 = h.startPod("b");
  h.startPod("d");
  auto answers = std::make_shared<std::vector<int>>();
  for (const std::string n : {"b", "d"}) {
    StubPod* pod = h.pods.find(n);
    h.controller().registerPod({pod->name, pod->uid, pod->address, pod->version, pod->incarnation},
                               [answers](http::Response r) { answers->push_back(r.status); });
  }
  ASSERT_TRUE(h.runUntil([&] { return answers->size() == 2; }, 60s));
  EXPECT_EQ(*answers, (std::vector<int>{200, 200}));
  const auto m = h.stored();
  ASSERT_EQ(m.status.pods.size(), 4u);
  for (const auto& p : m.status.pods) {
    if (p.name == "b") {
      EXPECT_EQ(p.uid, b2.uid);
    }
  }
  EXPECT_GT(m.status.epoch, before.status.epoch) << "the old b's shards changed owner";
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, FollowerAnswersNotLeader) {
  ControllerHarness h;
  h.lead();
  h.addReplica("kshard-operator-1");
  h.startPod("a");
  http::Response r = h.call([&](Reply reply) {
    h.controller(1).registerPod(
        {"a", h.pods.find("a")->uid, h.pods.find("a")->address, "1", h.pods.find("a")->incarnation},
        reply);
  });
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("NotLeader"), std::string::npos) << r.body;
}

TEST(ShardMapController, SameUidReRegisterKeepsShardsAndResendsAssign) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  const auto before = h.stored();
  const auto shardsA = shardsOf(h, "a");
  StubPod& a = *h.pods.find("a");
  // The sidecar restarts inside the same pod: it holds nothing until told again.
  a.registry = std::make_unique<sidecar::EntityRegistry>(
      *a.host, h.scheduler, sidecar::EntityRegistryOptions{},
      Logger("stub", LogLevel::kError, [](std::string_view) {}));
  const int assignsBefore = a.assigns;
  EXPECT_EQ(h.registerPod("a"), 200);
  ASSERT_TRUE(h.runUntil([&] { return a.held() == shardsA; }, 5s))
      << "the re-registered pod did not get its shards back";
  EXPECT_GT(a.assigns, assignsBefore);
  EXPECT_EQ(shardsOf(h, "a"), shardsA);
  // Nothing moved: same owners, same epoch.
  EXPECT_EQ(h.stored().status.assignments, before.status.assignments);
  EXPECT_EQ(h.stored().status.epoch, before.status.epoch);
}

// ---------------------------------------------------------------------------------------------
// Unregister and death

TEST(ShardMapController, UnregisterMovesShardsAtOnce) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b", "c"});
  StubPod& a = *h.pods.find("a");
  for (auto s : shardsOf(h, "a")) h.pods.touch("a", s, "e" + std::to_string(s));
  EXPECT_FALSE(a.host->activeShards().empty());
  const auto start = h.scheduler.clock().now();
  const int unassignsBefore = a.unassigns;
  EXPECT_EQ(h.unregisterPod("a"), 200);
  // The pod was told to release its shards first (epoch rule 5): its entities are stopped.
  EXPECT_EQ(a.unassigns, unassignsBefore + 1);
  EXPECT_TRUE(a.held().empty());
  EXPECT_EQ(h.counts().count("a"), 0u);
  ASSERT_TRUE(h.runUntil([&] { return h.unassigned() == 0 && h.converged(); }, 2s))
      << "the shards of the unregistered pod were not reassigned at once";
  EXPECT_LT(h.scheduler.clock().now() - start, 2s);
  EXPECT_EQ(h.events.count("PodUnregistered"), 1);
}

TEST(ShardMapController, UnregisterOfAPodThatCannotReleaseIsRefusedAndItKeepsItsShards) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& a = *h.pods.find("a");
  const auto shardsA = shardsOf(h, "a");
  const auto epoch = h.stored().status.epoch;
  a.unassignFault = Fault::kError;
  const int status = h.unregisterPod("a");
  EXPECT_TRUE(status == 503 || status == 504) << status;
  EXPECT_EQ(shardsOf(h, "a"), shardsA);
  // Epoch rule 3: the unassign went out at epoch + 1, so the epoch is persisted past it.
  ASSERT_TRUE(h.runUntil([&] { return h.stored().status.epoch > epoch; }, 5s));
  a.unassignFault = Fault::kNone;
  EXPECT_EQ(h.unregisterPod("a"), 200);
  ASSERT_TRUE(h.runUntil([&] { return shardsOf(h, "b").size() == 30u; }, 5s));
}

// The pod object of `name` gets a deletionTimestamp `grace` from now, as a delete with that
// grace period sets it, and the controller hears of it.
void deletePodObject(ControllerHarness& h, const std::string& name, std::chrono::seconds grace) {
  PodInfo* pod = h.directory.find(name);
  ASSERT_NE(pod, nullptr) << name;
  pod->terminating = true;
  pod->deletionTimestamp = h.scheduler.clock().wallNow() + grace;
  pod->deletionGracePeriodSeconds = grace.count();
  h.controller().podChanged(name);
}

http::Response unregisterCall(ControllerHarness& h, const std::string& name) {
  StubPod* pod = h.pods.find(name);
  protocol::UnregisterRequest req{pod->name, pod->uid};
  return h.call([&](Reply reply) { h.controller().unregisterPod(req, std::move(reply)); });
}

TEST(ShardMapController, RollingUpdateHoldsAnOldPodsShardsUntilTheNewPodRegisters) {
  ControllerHarness h(30);
  startBalanced(h, {"old-a", "old-b"}, "1.0.0");
  const auto shardsA = shardsOf(h, "old-a");
  StubPod& oldA = *h.pods.find("old-a");
  const int unassignsBefore = oldA.unassigns;
  // The Deployment creates a pod of the new version and deletes an old one before the new one
  // is ready (maxUnavailable).
  h.startPod("new-a", "2.0.0");
  h.controller().podChanged("new-a");
  deletePodObject(h, "old-a", 105s);

  const http::Response held = unregisterCall(h, "old-a");
  ASSERT_EQ(held.status, 409) << held.body;
  auto body = protocol::decodeUnregisterDeferred(held.body);
  ASSERT_TRUE(body.ok()) << body.status().toString() << " " << held.body;
  EXPECT_EQ(body->version, "2.0.0");
  EXPECT_EQ(body->startingPods, 1);
  EXPECT_EQ(body->retryAfterMs, 1000);
  EXPECT_GT(body->deferredForMs, 50'000);
  EXPECT_LE(body->deferredForMs, 60'000);
  EXPECT_EQ(held.headers.get("Retry-After").value_or(""), "1");
  // Nothing changed hands: the old pod keeps, and serves, its shards.
  EXPECT_EQ(oldA.unassigns, unassignsBefore);
  EXPECT_EQ(shardsOf(h, "old-a"), shardsA);

  // The hold does not keep the new pod from registering.
  h.run(5s);
  ASSERT_EQ(h.registerPod("new-a"), 200);
  // Now the unregister goes through, and the shards move once, straight to the new pod.
  const double movesBefore = h.moves();
  ASSERT_EQ(unregisterCall(h, "old-a").status, 200);
  ASSERT_TRUE(h.runUntil([&] { return shardsOf(h, "new-a") == shardsA; }, 5s))
      << "the old pod's shards did not go to the new pod";
  EXPECT_EQ(h.moves() - movesBefore, static_cast<double>(shardsA.size()));
  EXPECT_EQ(h.counts().count("old-a"), 0u);
}

TEST(ShardMapController, UnregisterHoldEndsAtItsMaximumWhenTheNewPodNeverRegisters) {
  ControllerHarness h(30);
  startBalanced(h, {"old-a", "old-b"}, "1.0.0");
  h.startPod("new-a", "2.0.0");  // never becomes ready
  h.controller().podChanged("new-a");
  deletePodObject(h, "old-a", 105s);
  ASSERT_EQ(unregisterCall(h, "old-a").status, 409);
  h.run(50s);
  ASSERT_EQ(unregisterCall(h, "old-a").status, 409);
  h.run(10s);  // 60 s after the delete
  ASSERT_EQ(unregisterCall(h, "old-a").status, 200);
  ASSERT_TRUE(h.runUntil([&] { return shardsOf(h, "old-b").size() == 30u; }, 5s));
}

TEST(ShardMapController, AScaleDownIsHeldOnlyUntilReplacementsWouldBeSeen) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  h.startPod("c");  // a replacement of the same version is starting: nothing newer
  h.controller().podChanged("c");
  deletePodObject(h, "a", 105s);
  // Right after the delete a newer pod may still be on its way to the informer.
  const http::Response early = unregisterCall(h, "a");
  ASSERT_EQ(early.status, 409) << early.body;
  auto body = protocol::decodeUnregisterDeferred(early.body);
  ASSERT_TRUE(body.ok()) << early.body;
  EXPECT_EQ(body->startingPods, 0);
  EXPECT_LE(body->deferredForMs, 5'000);
  h.run(5s);
  EXPECT_EQ(unregisterCall(h, "a").status, 200);
}

TEST(ShardMapController, UnregisterHoldReadsTheDeletionFromTheApiWhenTheInformerLags) {
  ControllerHarness h(30);
  startBalanced(h, {"old-a", "old-b"}, "1.0.0");
  h.startPod("new-a", "2.0.0");
  h.controller().podChanged("new-a");
  // The informer has not seen the delete yet; the API has.
  std::map<std::string, PodInfo> before;
  for (const std::string name : {"old-a", "old-b", "new-a"}) before[name] = *h.directory.find(name);
  h.directory.staleCache = before;
  PodInfo* oldA = h.directory.find("old-a");
  oldA->terminating = true;
  oldA->deletionTimestamp = h.scheduler.clock().wallNow() + 105s;
  oldA->deletionGracePeriodSeconds = 105;
  const int fetches = h.directory.fetches;
  EXPECT_EQ(unregisterCall(h, "old-a").status, 409);
  EXPECT_GT(h.directory.fetches, fetches);
}

TEST(ShardMapController, PodObjectGoneReassignsWithoutAcknowledgement) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b", "c"});
  h.killPod("b");
  ASSERT_TRUE(h.runUntil([&] { return h.counts().count("b") == 0 && h.converged(); }, 3s))
      << "the dead pod's shards were not reassigned at once";
  EXPECT_EQ(h.unassigned(), 0);
  EXPECT_EQ(h.events.count("PodDead"), 1);
}

TEST(ShardMapController, UidChangeMeansTheRegisteredPodIsDead) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  // StatefulSet-style: pod b is deleted (the kubelet reports its containers terminated) and
  // recreated under the same name.
  h.pods.kill("b");
  PodInfo next = *h.directory.find("b");
  next.uid = "uid-b-2";
  h.directory.erase("b");
  h.directory.put(next);
  h.controller().podChanged("b");
  ASSERT_TRUE(h.runUntil([&] { return h.counts().count("b") == 0 && h.unassigned() == 0; }, 3s));
  EXPECT_EQ(shardsOf(h, "a").size(), 30u);
  // The new incarnation registers under the same name.
  StubPod& b2 = h.pods.add("b", "uid-b-2", h.directory.find("b")->podIp + ":7101", "1.0.0");
  EXPECT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 300s));
  EXPECT_FALSE(b2.held().empty());
}

TEST(ShardMapController, FailedPhaseMeansDead) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  h.pods.kill("a");
  // As the kubelet reports a pod that ended for good: Failed, every container terminated.
  h.directory.find("a")->phase = "Failed";
  h.directory.find("a")->containersTerminated = true;
  h.controller().podChanged("a");
  ASSERT_TRUE(h.runUntil([&] { return h.counts().count("a") == 0 && h.unassigned() == 0; }, 3s));
}

TEST(ShardMapController, TerminatingPodThatDoesNotAnswerKeepsItsShards) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  const auto shardsA = shardsOf(h, "a");
  StubPod& a = *h.pods.find("a");
  a.pingFault = a.assignFault = a.unassignFault = Fault::kDropRequest;
  h.directory.find("a")->terminating = true;
  h.controller().podChanged("a");
  http::Response r = h.call([&](Reply reply) { h.controller().notifyUnhealthy({"a"}, reply); });
  EXPECT_EQ(r.status, 202);
  h.run(120s);
  // Alive (draining) means its entities might run: its shards are not taken without its ack.
  EXPECT_EQ(shardsOf(h, "a"), shardsA);
  EXPECT_EQ(a.held(), shardsA);
  EXPECT_EQ(h.events.count("PodDead"), 0);
  // Once the object is gone, they are.
  h.killPod("a");
  ASSERT_TRUE(h.runUntil([&] { return shardsOf(h, "b").size() == 30u; }, 3s));
}

TEST(ShardMapController, NotifyUnhealthyOfADeadPodRemovesIt) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  h.pods.kill("a");
  h.directory.erase("a");  // no informer event: only the notification tells the operator
  http::Response r = h.call([&](Reply reply) { h.controller().notifyUnhealthy({"a"}, reply); });
  EXPECT_EQ(r.status, 202);
  ASSERT_TRUE(h.runUntil([&] { return shardsOf(h, "b").size() == 30u; }, 3s));
}

// ---------------------------------------------------------------------------------------------
// Balancing

TEST(ShardMapController, PeriodicRoundsConvergeToBalanceWithinOne) {
  ControllerHarness h(300);
  h.lead();
  h.startPod("a");
  ASSERT_EQ(h.registerPod("a"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.counts()["a"] == 300; }, 5s));
  for (const char* n : {"b", "c", "d", "e"}) {
    h.startPod(n);
    ASSERT_EQ(h.registerPod(n), 200);
  }
  // A periodic round gives one pod at most ceil(0.02 x 300) = 6 shards; 60 per new pod takes
  // about 10 rounds of 20 s.
  int writesSeen = 0;
  std::map<std::string, std::int32_t> previous = h.counts();
  bool capHeld = true;
  h.store.afterEvent = [&] {
    h.checkInvariant();
    ++writesSeen;
    auto now = h.counts();
    for (auto& [pod, n] : now) {
      if (previous.count(pod) && n - previous[pod] > 6) capHeld = false;
    }
    previous = now;
  };
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 900s))
      << "no convergence after 900 s of simulated time";
  EXPECT_TRUE(capHeld) << "a pod received more than rebalanceRate x shards in one write";
  for (auto& [pod, n] : h.counts()) EXPECT_TRUE(n == 60) << pod << " has " << n;
  EXPECT_EQ(h.conditionStatus("Balanced"), "True");
  EXPECT_EQ(h.conditionStatus("Progressing"), "False");
  EXPECT_GE(h.moves(), 240.0);
}

TEST(ShardMapController, RollingUpdateMovesEachShardOnceAndOnlyToTheNewestVersion) {
  ControllerHarness h(60);
  startBalanced(h, {"v1-a", "v1-b", "v1-c"}, "1.0.0");
  // Owner history per shard from now on.
  std::map<sharding::ShardId, std::vector<std::string>> owners;
  auto record = [&] {
    auto m = h.stored();
    auto t = h.storedTable();
    for (sharding::ShardId s = 1; s <= 60; ++s) {
      const auto o = t.owner(s);
      const std::string name =
          o == sharding::kNoPod ? "" : m.status.pods[static_cast<std::size_t>(o)].name;
      auto& seq = owners[s];
      if (!name.empty() && (seq.empty() || seq.back() != name)) seq.push_back(name);
    }
  };
  record();
  h.store.afterEvent = [&] {
    h.checkInvariant();
    record();
  };
  // The Deployment surges a new pod, then stops an old one, three times.
  const std::vector<std::pair<std::string, std::string>> steps{
      {"v2-a", "v1-a"}, {"v2-b", "v1-b"}, {"v2-c", "v1-c"}};
  for (const auto& [fresh, old] : steps) {
    h.startPod(fresh, "2.0.0");
    ASSERT_EQ(h.registerPod(fresh), 200);
    h.run(45s);  // periodic rounds run: versions differ, so they must not balance
    ASSERT_EQ(h.unregisterPod(old), 200);
    ASSERT_TRUE(h.runUntil([&] { return h.unassigned() == 0; }, 5s));
  }
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 300s));
  for (const auto& [shard, seq] : owners) {
    ASSERT_LE(seq.size(), 2u) << "shard " << shard << " moved more than once";
    EXPECT_EQ(seq.back().rfind("v2-", 0), 0u) << "shard " << shard << " ended on " << seq.back();
  }
  for (auto& [pod, n] : h.counts()) EXPECT_EQ(n, 20) << pod;
}

TEST(ShardMapController, StatusIsWrittenOnlyWhenItChanges) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b", "c"});
  h.run(30s);
  const int writes = h.store.writes;
  const auto before = h.stored();
  h.run(200s);  // ten periodic rounds with nothing to do
  EXPECT_EQ(h.store.writes, writes);
  EXPECT_EQ(h.stored().metadata.resourceVersion, before.metadata.resourceVersion);
  EXPECT_GE(h.rebalances("idle"), 9.0);
}

TEST(ShardMapController, SpecChangeIsPickedUp) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  auto m = h.stored();
  m.spec.rebalanceInterval = 5s;
  h.store.put(m);
  h.controller().observe(h.stored());
  ASSERT_TRUE(h.runUntil([&] { return h.stored().status.observedGeneration == 2; }, 30s))
      << "observedGeneration was not updated after a spec change";
  for (const auto& c : h.stored().status.conditions) EXPECT_EQ(c.observedGeneration, 2) << c.type;
}

// ---------------------------------------------------------------------------------------------
// Takeover

TEST(ShardMapController, TakeoverOfAStableMapMovesNothing) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b", "c"});
  const auto before = h.stored();
  const double movesBefore = h.moves();
  h.addReplica("kshard-operator-1");
  h.loseLease(0);
  h.lead(1);
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 60s));
  h.run(60s);
  const auto after = h.stored();
  EXPECT_EQ(after.status.manager->pod, "kshard-operator-1");
  EXPECT_EQ(after.status.epoch, before.status.epoch + 1);
  // Same owners; the groups keep the epochs they were given at.
  EXPECT_EQ(after.status.assignments, before.status.assignments);
  EXPECT_EQ(h.moves(), movesBefore);
  // Epoch rule 3: every pod was told its shards again at the new epoch.
  for (const char* n : {"a", "b", "c"}) {
    StubPod& p = *h.pods.find(n);
    ASSERT_FALSE(p.assignLog.empty());
    EXPECT_EQ(p.assignLog.back().epoch, static_cast<protocol::Epoch>(after.status.epoch)) << n;
  }
}

TEST(ShardMapController, TakeoverDropsPodsThatDiedMeanwhile) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b", "c"});
  h.addReplica("kshard-operator-1");
  h.loseLease(0);
  h.run(1s);
  // While nobody leads, c dies.
  h.pods.kill("c");
  h.directory.erase("c");
  h.lead(1);
  ASSERT_TRUE(h.runUntil([&] { return h.counts().count("c") == 0 && h.converged(); }, 60s));
}

TEST(ShardMapController, TakeoverFinishesWhatTheOldLeaderPersistedButDidNotAssign) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& b = h.startPod("b");
  b.assignFault = Fault::kDropRequest;  // the old leader's assigns to b never arrive
  ASSERT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.counts()["b"] > 0; }, 60s));
  h.loseLease(0);
  b.assignFault = Fault::kNone;
  EXPECT_TRUE(b.held().empty());
  h.addReplica("kshard-operator-1");
  h.lead(1);
  ASSERT_TRUE(h.runUntil([&] { return b.held() == shardsOf(h, "b"); }, 30s))
      << "the new leader did not re-send the stored assignments";
}

// ---------------------------------------------------------------------------------------------
// Faults

TEST(ShardMapController, PingTimeoutDropsTheMovesOfThatPod) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  StubPod& b = h.startPod("b");
  b.pingFault = Fault::kDropRequest;
  ASSERT_EQ(h.registerPod("b"), 200);
  h.run(25s);  // the periodic round after the register: b does not answer its ping
  EXPECT_EQ(a.unassigns, 0) << "a shard was taken from a for a pod that did not answer";
  EXPECT_EQ(h.counts()["b"], 0);
  EXPECT_GE(h.events.count("RebalanceIncomplete"), 1);
  EXPECT_EQ(h.conditionStatus("Progressing"), "True");
  b.pingFault = Fault::kNone;
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, UnassignFailureAbandonsTheMoveButPersistsTheFence) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  a.unassignFault = Fault::kError;
  h.startPod("b");
  const auto epoch = h.stored().status.epoch;
  ASSERT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return a.unassigns > 0; }, 30s));
  ASSERT_TRUE(h.runUntil([&] { return h.stored().status.epoch > epoch; }, 5s))
      << "epoch rule 3: a round that sent an unassign must persist a new epoch";
  EXPECT_EQ(h.counts()["b"], 0);
  EXPECT_EQ(h.counts()["a"], 30);
  a.unassignFault = Fault::kNone;
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, LostUnassignAnswerLeavesTheShardsWithTheirOwner) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  a.unassignFault = Fault::kDropResponse;  // a releases, the operator never hears it
  h.startPod("b");
  ASSERT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return a.unassigns > 0; }, 30s));
  // The move is abandoned and the shards go back to a, at the persisted epoch.
  ASSERT_TRUE(h.runUntil([&] { return a.held().size() == 30u; }, 60s))
      << "a did not get back the shards it released";
  a.unassignFault = Fault::kNone;
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, LostAssignIsRepairedByReconciliation) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& b = h.startPod("b");
  b.assignFault = Fault::kDropRequest;
  ASSERT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.counts()["b"] > 0; }, 60s));
  EXPECT_TRUE(b.held().empty());
  b.assignFault = Fault::kNone;
  // Epoch rule 4: the next periodic ping shows b lacks its shards; assign is re-sent.
  ASSERT_TRUE(h.runUntil([&] { return !b.held().empty() && b.held() == shardsOf(h, "b"); }, 60s));
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, DelayedDuplicateAssignIsFencedAfterTheShardMoved) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& b = h.startPod("b");
  b.assignFault = Fault::kDelayRequest;
  b.delay = 120s;  // the first assign to b arrives two minutes late
  ASSERT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.counts()["b"] > 0; }, 60s));
  const auto late = b.assignLog.size();
  b.assignFault = Fault::kNone;
  ASSERT_TRUE(h.runUntil([&] { return !b.held().empty(); }, 60s));
  // b leaves before the late assign arrives; its shards go to a.
  ASSERT_EQ(h.unregisterPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return h.pods.find("a")->held().size() == 30u; }, 5s));
  // The delayed assign arrives now: b's fence refuses it (checkInvariant runs on it).
  h.run(150s);
  EXPECT_GT(b.assignLog.size(), late);
  EXPECT_TRUE(b.held().empty()) << "a stale assign was accepted";
}

TEST(ShardMapController, ConflictOnPersistAbortsTheRoundWithoutAssigning) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& b = h.startPod("b");
  ASSERT_EQ(h.registerPod("b"), 200);
  // The round after the register: its persist meets a Conflict.
  h.store.conflictNextWrites = 1;
  const int assignsBefore = b.assigns;
  ASSERT_TRUE(h.runUntil([&] { return h.rebalances("conflict") >= 1.0; }, 60s));
  EXPECT_EQ(b.assigns, assignsBefore) << "epoch rule 6: a Conflict must never lead to an assign";
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, LeadershipLostBeforePersistAssignsNothing) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& b = h.startPod("b");
  ASSERT_EQ(h.registerPod("b"), 200);
  h.store.holdWrites = true;
  ASSERT_TRUE(h.runUntil([&] { return !h.store.held.empty(); }, 60s));
  // The round waits for its write; the lease is lost meanwhile; the write then succeeds.
  const int assignsBefore = b.assigns;
  h.replica(0).leadership.leader = false;
  h.store.holdWrites = false;
  for (auto& w : h.store.held) w();
  h.store.held.clear();
  h.run(60s);
  EXPECT_EQ(b.assigns, assignsBefore) << "epoch rule 7: assign sent after losing the lease";
  // A new leader finishes the job.
  h.addReplica("kshard-operator-1");
  h.controller(0).stopLeading();
  h.lead(1);
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
}

TEST(ShardMapController, LeadershipLostDuringUnassignStopsTheRound) {
  ControllerHarness h(30);
  startBalanced(h, {"a"});
  StubPod& a = *h.pods.find("a");
  for (auto s : shardsOf(h, "a")) h.pods.touch("a", s, "e" + std::to_string(s));
  a.host->stopLatency = 2s;  // the handoff takes a while
  StubPod& b = h.startPod("b");
  ASSERT_EQ(h.registerPod("b"), 200);
  ASSERT_TRUE(h.runUntil([&] { return a.unassigns > 0; }, 60s));
  const int writes = h.store.writes;
  h.loseLease(0);
  h.run(30s);
  EXPECT_EQ(h.store.writes, writes);
  EXPECT_EQ(b.assigns, 0);
  // a released the shards, fenced at the epoch the old leader never persisted.
  EXPECT_LT(a.held().size(), 30u);
  // b does not answer the new leader for now, so its first round moves nothing and persists
  // nothing: only the takeover's epoch can cover the old leader's fence.
  b.pingFault = Fault::kDropRequest;
  h.addReplica("kshard-operator-1");
  h.lead(1);
  // Epoch rule 3: the new leader's epoch is past those fences, so a takes them back at once
  // and no assign is refused as stale.
  ASSERT_TRUE(h.runUntil([&] { return a.held() == shardsOf(h, "a"); }, 5s))
      << "a did not get back the shards the old leader had unassigned";
  EXPECT_EQ(a.refusedShards, 0);
  b.pingFault = Fault::kNone;
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
  EXPECT_EQ(a.refusedShards, 0);
}

TEST(ShardMapController, StrayShardsAreUnassigned) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  StubPod& b = *h.pods.find("b");
  const auto shardsA = shardsOf(h, "a");
  const sharding::ShardId stray = *shardsA.begin();
  // A deposed leader's late assign slipped through: b serves one of a's shards. The invariant
  // is broken on purpose here; the periodic round must repair it.
  auto check = h.store.afterEvent;
  h.store.afterEvent = h.pods.afterEvent = nullptr;
  (void)b.registry->assign({stray}, static_cast<sidecar::Epoch>(h.stored().status.epoch));
  ASSERT_TRUE(b.registry->owns(stray));
  ASSERT_TRUE(h.runUntil([&] { return !b.registry->owns(stray); }, 30s))
      << "epoch rule 4: the stray shard was not unassigned";
  h.store.afterEvent = h.pods.afterEvent = check;
  h.checkInvariant();
  EXPECT_TRUE(h.pods.find("a")->registry->owns(stray));
}

TEST(ShardMapController, MetricsCountRoundsMovesAndApiState) {
  ControllerHarness h(30);
  startBalanced(h, {"a", "b"});
  EXPECT_EQ(h.moves(), 45.0);  // 30 placed on a, then 15 balanced onto b
  EXPECT_GE(h.rebalances("moved"), 2.0);
  const std::string text = h.registry.exposition();
  EXPECT_NE(text.find("kshard_operator_pod_shards_min{shard_map=\"demo/counter\"} 15"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kshard_operator_pod_shards_max{shard_map=\"demo/counter\"} 15"),
            std::string::npos)
      << text;
  // Issue 29: /metrics named every tenant's pods.
  for (const char* pod : {"\"a\"", "\"b\"", "uid-a", "10.1.0."}) {
    EXPECT_EQ(text.find(pod), std::string::npos) << pod << " in\n" << text;
  }
  EXPECT_NE(text.find("kshard_operator_unassigned_shards{shard_map=\"demo/counter\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("kshard_operator_rebalance_duration_seconds_count"), std::string::npos);
}

// A remove-dead queued behind a running operation is dropped with the queue when the lease is
// lost; once the replica leads again, a pod that dies is still removed (its "queued" mark went
// with the operation).
TEST(ShardMapController, DeadPodsAreRemovedAfterTheLeaseIsLostAndRegained) {
  ControllerHarness h(30);
  h.lead();
  for (const std::string n : {"a", "b", "c"}) {
    h.startPod(n);
    ASSERT_EQ(h.registerPod(n), 200) << n;
  }
  ASSERT_TRUE(h.runUntil([&] { return h.converged(); }, 600s));
  h.startPod("d");
  ASSERT_EQ(h.registerPod("d"), 200);
  // The round that gives d a share waits for its write; c dies meanwhile, and its removal
  // waits behind the round.
  h.store.holdWrites = true;
  ASSERT_TRUE(h.runUntil([&] { return !h.store.held.empty(); }, 60s));
  h.killPod("c");
  h.run(100ms);
  // The lease is lost before the round ends: the queued removal is dropped.
  h.loseLease(0);
  h.store.holdWrites = false;
  for (auto& w : h.store.held) w();
  h.store.held.clear();
  h.run(10s);
  h.lead(0);
  h.run(5s);
  // b dies (the kubelet confirms it: its shards may move at once).
  h.killPod("b");
  EXPECT_TRUE(h.runUntil([&] { return h.counts().count("b") == 0; }, 120s))
      << "the dead pod b was never removed from the map";
  EXPECT_TRUE(h.runUntil([&] { return h.converged(); }, 600s)) << "b's shards stayed on a dead pod";
}

}  // namespace
}  // namespace kshard::manager::testing
