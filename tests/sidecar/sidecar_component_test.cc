// Component test of kshard-sidecar (tests/sidecar/component_fixture.h): continuous traffic checks
// that messages reach the owner, that no entity is ever active on two pods while shards move, and
// that a drain loses no acknowledged message.
#include "tests/sidecar/component_fixture.h"

namespace kshard::sidecar {
namespace {

TEST_F(SidecarComponentTest, MessagesReachTheOwnerOfTheirShard) {
  std::map<std::string, int> entitiesOn;  // by owner
  for (int i = 0; i < 60; ++i) {
    const std::string id = "entity-" + std::to_string(i);
    const auto shard = *sharding::shardIdOf(id, kShards);
    Sidecar& via = *sidecars_[static_cast<std::size_t>(i) % sidecars_.size()];
    auto r = increment(via, id);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string owner = operator_.ownerOf(shard);
    EXPECT_EQ(r->headers.get(protocol::kOwnerHeader), owner) << id << " sent via " << via.pod;
    EXPECT_EQ(json::parse(r->body)["pod"], owner) << "the app of another pod ran " << id;
    ++entitiesOn[owner];
  }
  // Each owner's metrics show the entities its app runs and the shards it owns. The map's idle
  // timeout is 2 s, so on a slow run some entities may be passivated meanwhile: the metric and
  // the app's view are read together until they agree, and at least one pod must agree on
  // entities that are still running.
  bool sawRunning = false;
  for (const auto& sc : sidecars_) {
    std::optional<double> shown;
    std::size_t running = 0;
    EXPECT_TRUE(waitFor(
        [&] {
          shown = metric(*sc, R"(kshard_sidecar_active_entities{type="counter"})");
          std::lock_guard lock(world_.mu);
          running = world_.live[sc->pod].size();
          // A type with no active entity has no series.
          return shown.value_or(0.0) == static_cast<double>(running) &&
                 shown.has_value() == (running > 0);
        },
        seconds(10)))
        << sc->pod << " exports " << (shown ? std::to_string(*shown) : std::string("no series"))
        << " active counters while its app runs " << running << " (it got " << entitiesOn[sc->pod]
        << ")";
    sawRunning = sawRunning || running > 0;
    EXPECT_EQ(metric(*sc, "kshard_sidecar_owned_shards"),
              static_cast<double>(operator_.shardsOf(sc->pod).size()))
        << sc->pod;
  }
  EXPECT_TRUE(sawRunning) << "every entity was passivated before the metrics were read";
}

TEST_F(SidecarComponentTest, RejectsBadInputAndKeepsServing) {
  Sidecar& sc = *sidecars_[0];
  const auto post = [&](std::string target, std::string body = "{}") {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = std::move(target);
    r.body = std::move(body);
    return sc.api->sendSync(std::move(r));
  };
  EXPECT_EQ(post("/v1/entities/counter/" + std::string(1025, 'x'))->status, 400);
  EXPECT_EQ(post("/v1/entities/counter/%FF%FE")->status, 400);
  EXPECT_EQ(post("/v1/entities/counter/a?mode=shout")->status, 400);
  EXPECT_EQ(post("/v1/nothing/here")->status, 404);
  // An empty or missing type or id is named as such.
  for (const auto& [target, problem] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/entities/counter/", "entity id: must not be empty"},
           {"/v1/entities/counter", "entity id: must not be empty"},
           {"/v1/entities//a", "entity type: must not be empty"},
           {"/v1/entities//", "entity type: must not be empty"}}) {
    auto r = post(target);
    ASSERT_TRUE(r.ok()) << target << ": " << r.status().toString();
    EXPECT_EQ(r->status, 400) << target;
    EXPECT_NE(r->body.find(problem), std::string::npos) << target << ": " << r->body;
  }
  EXPECT_EQ(post("/v1/entities/counter/a", std::string(5 << 20, 'x'))->status, 413);
  // The same on the peer API, and for malformed JSON from the operator.
  const auto postPeer = [&](std::string target, std::string body) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = std::move(target);
    r.headers.set("Kshard-Shard", "1");
    r.headers.set("Content-Type", "application/json");
    r.body = std::move(body);
    return sc.peer->sendSync(std::move(r));
  };
  auto emptyId = postPeer("/v1/peer/entities/counter/", "{}");
  ASSERT_TRUE(emptyId.ok()) << emptyId.status().toString();
  EXPECT_EQ(emptyId->status, 400);
  EXPECT_NE(emptyId->body.find("entity id: must not be empty"), std::string::npos) << emptyId->body;
  auto malformed = postPeer("/v1/shards/assign", R"({"shards": [1, 2)");
  ASSERT_TRUE(malformed.ok()) << malformed.status().toString();
  EXPECT_EQ(malformed->status, 400) << malformed->body;
  EXPECT_TRUE(json::accept(malformed->body)) << "not a JSON error: " << malformed->body;
  auto ok = increment(sc, "still-serving");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
}

// The invariants hold whichever way the sidecars forward to each other.
class SidecarComponentTransportTest : public SidecarComponentTest,
                                      public ::testing::WithParamInterface<std::string> {
 protected:
  std::string peerTransport() const override { return GetParam(); }
};

TEST_P(SidecarComponentTransportTest,
       ShardsMovedUnderTrafficAreNeverServedTwiceAndDrainLosesNothing) {
  Traffic traffic;
  std::atomic<int> senders{3};
  startTraffic(traffic, senders, 4);
  std::mt19937 rng(7);

  // Move shards around under traffic.
  for (int round = 0; round < 12; ++round) {
    const auto pods = operator_.pods();
    const std::size_t f = rng() % pods.size();
    const std::string from = pods[f];
    const std::string to = pods[(f + 1 + rng() % (pods.size() - 1)) % pods.size()];
    auto owned = operator_.shardsOf(from);
    std::shuffle(owned.begin(), owned.end(), rng);
    owned.resize(std::min<std::size_t>(owned.size(), 6));
    EXPECT_TRUE(operator_.move(from, to, owned)) << "unassign of " << from << " failed";
    std::this_thread::sleep_for(milliseconds(150));
  }

  // Drain p3 under traffic: stop sending through it, then SIGTERM.
  senders.store(2);
  std::this_thread::sleep_for(milliseconds(100));
  sidecars_[2]->process->signal(SIGTERM);
  const int exitCode = sidecars_[2]->process->wait(seconds(30));
  EXPECT_EQ(exitCode, 0) << "p3 did not drain cleanly; its log:\n"
                         << sidecars_[2]->process->logTail();
  ASSERT_TRUE(waitFor([&] { return operator_.pods().size() == 2; }, seconds(10)));
  ASSERT_TRUE(waitFor(
      [&] {
        return operator_.shardsOf("p1").size() + operator_.shardsOf("p2").size() ==
               static_cast<std::size_t>(kShards);
      },
      seconds(10)))
      << "p3's shards were not placed on the other pods";
  std::this_thread::sleep_for(milliseconds(500));
  stopTraffic(traffic);

  std::lock_guard lock(world_.mu);
  EXPECT_TRUE(world_.violations.empty())
      << world_.violations.size() << " violations, first: " << world_.violations.front();
  // Over channels nothing fails: the exiting sidecar's goaway says which requests it took. Over
  // plain HTTP a request that met the exiting sidecar closing its idle keep-alive connection
  // cannot be told from one its sidecar took and crashed on: it fails OutcomeUnknown and is
  // not sent again (it was not applied here, which the counters below confirm).
  std::vector<std::string> unexpected;
  for (const auto& f : traffic.failures) {
    const bool exitRace = GetParam() == "http" && f.find("OutcomeUnknown") != std::string::npos &&
                          f.find("owner p3") != std::string::npos;
    if (!exitRace) unexpected.push_back(f);
  }
  EXPECT_TRUE(unexpected.empty())
      << unexpected.size() << " failed requests, first: " << unexpected.front();
  long total = 0;
  for (const auto& [id, acked] : traffic.acked) {
    long value = world_.saved.count(id) ? world_.saved.at(id) : 0;
    auto on = world_.activeOn.find(id);
    if (on != world_.activeOn.end()) value = world_.live[on->second][id];
    EXPECT_EQ(value, acked) << id << ": the counter does not match the increments acknowledged";
    total += acked;
  }
  EXPECT_GT(total, 200) << "too little traffic to mean anything";
  EXPECT_GT(world_.stops, 0) << "no entity was ever stopped: no handoff happened";
}

INSTANTIATE_TEST_SUITE_P(PeerTransports, SidecarComponentTransportTest,
                         ::testing::Values("channel", "http"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// A drain stops the pod's entities through its app at most --max-concurrent-stops at a time, and
// every entity's state is saved before the sidecar exits.
TEST_F(SidecarComponentTest, ADrainStopsEntitiesAFewAtATimeAndSavesEveryOne) {
  Sidecar& leaving = *sidecars_[2];
  std::vector<std::string> ids;  // entities whose shards p3 owns
  for (int i = 0; ids.size() < 12; ++i) {
    const std::string id = "drained-" + std::to_string(i);
    if (operator_.ownerOf(*sharding::shardIdOf(id, kShards)) == "p3") ids.push_back(id);
  }
  for (const auto& id : ids) {
    auto r = increment(leaving, id);
    ASSERT_TRUE(r.ok() && r->status == 200)
        << id << ": " << (r.ok() ? r->body : r.status().toString());
  }
  apps_[2]->delayStops(milliseconds(100));
  leaving.process->signal(SIGTERM);
  EXPECT_EQ(leaving.process->wait(seconds(30)), 0) << "p3 did not drain cleanly; its log:\n"
                                                   << leaving.process->logTail();
  EXPECT_EQ(apps_[2]->mostStopsAtOnce(), kMaxConcurrentStops)
      << "the app did not see the drain's stop calls " << kMaxConcurrentStops << " at a time";
  std::lock_guard lock(world_.mu);
  EXPECT_TRUE(world_.live["p3"].empty())
      << world_.live["p3"].size() << " entities still active at p3's app after its drain";
  for (const auto& id : ids) EXPECT_EQ(world_.saved[id], 1) << id << " was not saved by its stop";
}

// A request of the app that is still waiting for its shard's owner when the sidecar gets SIGTERM
// (after its drain) is answered, not cut: the app API closes to new connections and waits up to
// sendTimeout, with the ShardMap still followed. An end-to-end scale-down once lost such a request.
TEST_F(SidecarComponentTest, AnAppRequestInFlightAtExitIsAnsweredOnceItsShardHasAnOwner) {
  Sidecar& leaving = *sidecars_[2];
  // An entity whose shard p1 gives up, and nobody takes until the test says so.
  std::string id;
  for (int i = 0; id.empty(); ++i) {
    const std::string candidate = "orphan-" + std::to_string(i);
    if (operator_.ownerOf(*sharding::shardIdOf(candidate, kShards)) == "p1") id = candidate;
  }
  const auto shard = *sharding::shardIdOf(id, kShards);
  operator_.placeOnUnregister_.store(false);
  ASSERT_TRUE(operator_.release("p1", {shard}));
  const auto retriesNoOwner = [&] {
    return metric(leaving, R"(kshard_sidecar_retries_total{reason="no_owner"})").value_or(0.0);
  };
  const double retriesBefore = retriesNoOwner();
  auto inFlight = std::async(std::launch::async, [&] { return increment(leaving, id); });
  ASSERT_TRUE(waitFor([&] { return retriesNoOwner() > retriesBefore; }, seconds(5)))
      << "the request through p3 never waited for an owner";

  leaving.process->signal(SIGTERM);
  // The exit has begun once the app API refuses new connections (the drain and unregister
  // come before it).
  const std::string apiAddress = "127.0.0.1:" + std::to_string(leaving.apiPort);
  ASSERT_TRUE(waitFor(
      [&] {
        http::Request r;
        r.target = "/v1/shard-map";
        return !client(apiAddress)->sendSync(std::move(r)).ok();
      },
      seconds(15)))
      << "p3's app API still takes new connections after SIGTERM; its log:\n"
      << leaving.process->logTail();
  // Longer than the old 1 s given to requests in flight, shorter than sendTimeout (10 s).
  std::this_thread::sleep_for(seconds(2));
  operator_.placeUnassigned();

  ASSERT_EQ(inFlight.wait_for(seconds(15)), std::future_status::ready)
      << "the request in flight got no answer";
  auto r = inFlight.get();
  ASSERT_TRUE(r.ok()) << "the request in flight was cut: " << r.status().toString();
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->headers.get(protocol::kOwnerHeader), "p3");
  EXPECT_EQ(leaving.process->wait(seconds(15)), 0) << leaving.process->logTail();
}

}  // namespace
}  // namespace kshard::sidecar
