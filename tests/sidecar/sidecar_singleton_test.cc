// Singletons with three real sidecars (tests/sidecar/component_fixture.h): a singleton of the
// map's spec runs on the owner of its shard without any message, moves with that shard, comes
// back after its sidecar dies, and is never active on two pods (the stub apps record a
// violation when a start or message activates it while another pod has it).
#include "tests/sidecar/component_fixture.h"

namespace kshard::sidecar {
namespace {

class SidecarSingletonTest : public SidecarComponentTest {
 protected:
  void configureMap(sharding::ShardMapSpec& spec) override { spec.singletons = {"ticker"}; }

  // The pod whose app runs the ticker, or "".
  std::string runningOn() {
    std::lock_guard lock(world_.mu);
    auto it = world_.activeOn.find(StubApp::singletonEntity("ticker"));
    return it == world_.activeOn.end() ? "" : it->second;
  }
  long starts() {
    std::lock_guard lock(world_.mu);
    return world_.starts;
  }
  std::size_t indexOf(const std::string& pod) {
    for (std::size_t i = 0; i < sidecars_.size(); ++i) {
      if (sidecars_[i]->pod == pod) return i;
    }
    ADD_FAILURE() << "no pod " << pod;
    return 0;
  }
  // Another pod than `pod`.
  std::string otherThan(const std::string& pod) { return pod == "p1" ? "p2" : "p1"; }
  StatusOr<http::Response> toSingleton(Sidecar& via, const std::string& name) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/v1/singletons/" + name;
    r.body = "{}";
    return via.api->sendSync(std::move(r));
  }
  void expectNoViolation() {
    std::lock_guard lock(world_.mu);
    EXPECT_TRUE(world_.violations.empty())
        << world_.violations.size() << " violations, first: " << world_.violations.front();
  }
};

TEST_F(SidecarSingletonTest, ASingletonRunsOnItsShardsOwnerAndMovesWithTheShard) {
  const auto shard = *sharding::shardIdOf("ticker", kShards);
  const std::string first = operator_.ownerOf(shard);
  ASSERT_TRUE(waitFor([&] { return runningOn() == first; }, seconds(10)))
      << "the singleton did not start on " << first << " without a message; it runs on '"
      << runningOn() << "'";
  for (const auto& sc : sidecars_) {
    const double expected = sc->pod == first ? 1 : 0;
    EXPECT_TRUE(waitFor([&] { return metric(*sc, "kshard_sidecar_singletons_active") == expected; },
                        seconds(5)))
        << sc->pod;
  }
  // Idleness does not stop it (the map's entityIdleTimeout is 2 s).
  std::this_thread::sleep_for(seconds(3));
  EXPECT_EQ(runningOn(), first) << "the singleton was passivated";

  // A message sent through any pod reaches it on the owner; an undeclared name is not found.
  Sidecar& via = *sidecars_[indexOf(otherThan(first))];
  auto answer = toSingleton(via, "ticker");
  ASSERT_TRUE(answer.ok()) << answer.status().toString();
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(json::parse(answer->body)["pod"], first);
  auto unknown = toSingleton(via, "nope");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404) << unknown->body;

  // Its shard moves: it stops on the old owner before it starts on the new one.
  const std::string second = otherThan(first);
  ASSERT_TRUE(operator_.move(first, second, {shard}));
  ASSERT_TRUE(waitFor([&] { return runningOn() == second; }, seconds(10)))
      << "the singleton did not follow its shard to " << second << "; it runs on '" << runningOn()
      << "'";
  expectNoViolation();
}

TEST_F(SidecarSingletonTest, ASingletonComesBackAfterItsSidecarOrItsPodDies) {
  const auto shard = *sharding::shardIdOf("ticker", kShards);
  const std::string owner = operator_.ownerOf(shard);
  ASSERT_TRUE(waitFor([&] { return runningOn() == owner; }, seconds(10)));
  Sidecar& sc = *sidecars_[indexOf(owner)];
  StubApp& app = *apps_[indexOf(owner)];

  // The sidecar's container alone is killed: its app runs on with the singleton until the
  // restarted sidecar resets it, and the singleton starts again once the shards are back.
  const long before = starts();
  const int resets = app.resets();
  restart(sc);
  ASSERT_TRUE(waitFor([&] { return runningOn() == owner && starts() > before; }, seconds(30)))
      << "the singleton did not start again after its sidecar restarted; its log:\n"
      << sc.process->logTail();
  EXPECT_EQ(app.resets(), resets + 1) << "the restarted sidecar did not reset its app";

  // The whole pod dies; once nothing of it can run, its shards go to another pod.
  sc.process->signal(SIGKILL);
  ASSERT_EQ(sc.process->wait(seconds(10)), 128 + SIGKILL);
  app.crash();
  const std::string next = otherThan(owner);
  operator_.reassignFromDead(owner, next, operator_.shardsOf(owner));
  ASSERT_TRUE(waitFor([&] { return runningOn() == next; }, seconds(10)))
      << "the singleton did not start on " << next << "; it runs on '" << runningOn() << "'";
  expectNoViolation();
}

}  // namespace
}  // namespace kshard::sidecar
