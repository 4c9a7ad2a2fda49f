// Remembered entities with three real sidecars (tests/sidecar/component_fixture.h) and an API
// server for their ShardEntities records (tests/sidecar/component_api_server.h): an entity that
// a message started runs again on its shard's next owner, without any message, after the shard
// moves and after its pod dies; never on two pods at once.
#include "sharding/shard_entities.h"
#include "tests/sidecar/component_api_server.h"
#include "tests/sidecar/component_fixture.h"

namespace kshard::sidecar {
namespace {

// How long the next owner may take to start them: a list of the records, a claim, the starts.
constexpr auto kRestartBound = seconds(10);

class RememberedComponentTest : public SidecarComponentTest {
 protected:
  std::vector<std::string> extraArgs() const override {
    return {"--kubeconfig=" + apiServer_.kubeconfig()};
  }
  void configureMap(sharding::ShardMapSpec& spec) override {
    spec.rememberedEntityTypes = {"counter"};
    spec.entityIdleTimeout = seconds(1);  // a plain entity would be long gone
  }

  // `count` entities whose shards `pod` owns now.
  std::vector<std::string> idsOn(const std::string& pod, std::size_t count) {
    std::vector<std::string> ids;
    for (int i = 0; ids.size() < count; ++i) {
      const std::string id = "remembered-" + std::to_string(i);
      if (operator_.ownerOf(*sharding::shardIdOf(id, kShards)) == pod) ids.push_back(id);
    }
    return ids;
  }
  static std::vector<sharding::ShardId> shardsOf(const std::vector<std::string>& ids) {
    std::set<sharding::ShardId> out;
    for (const auto& id : ids) out.insert(*sharding::shardIdOf(id, kShards));
    return {out.begin(), out.end()};
  }
  bool allActiveOn(const std::vector<std::string>& ids, const std::string& pod) {
    std::lock_guard lock(world_.mu);
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) {
      auto it = world_.activeOn.find(id);
      return it != world_.activeOn.end() && it->second == pod;
    });
  }
  // The entity ids the API server's records list.
  std::set<std::string> recorded() {
    std::set<std::string> out;
    for (const json& o : apiServer_.api().list(kube::resources::kShardEntities, "demo")) {
      auto r = sharding::shardEntitiesFromJson(o);
      EXPECT_TRUE(r.ok());
      if (r.ok()) {
        for (const auto& e : r->entities) out.insert(e.id);
      }
    }
    return out;
  }
  // The pod's app dies with its sidecar: what it held in memory is gone.
  void appDies(const std::string& pod) {
    std::lock_guard lock(world_.mu);
    world_.live.erase(pod);
    std::erase_if(world_.activeOn, [&](const auto& e) { return e.second == pod; });
  }
  void expectNoViolation() {
    std::lock_guard lock(world_.mu);
    EXPECT_TRUE(world_.violations.empty())
        << world_.violations.size() << " violations, first: " << world_.violations.front();
  }

  ComponentApiServer apiServer_;
};

TEST_F(RememberedComponentTest, AfterItsShardMovesARememberedEntityRunsAgainWithoutAMessage) {
  const auto ids = idsOn("p1", 4);
  for (const auto& id : ids) {
    auto r = increment(*sidecars_[0], id);
    ASSERT_TRUE(r.ok() && r->status == 200) << id << ": " << (r.ok() ? r->body : "");
  }
  EXPECT_EQ(recorded(), std::set<std::string>(ids.begin(), ids.end()));
  std::this_thread::sleep_for(seconds(2));  // past the idle timeout: still active
  ASSERT_TRUE(allActiveOn(ids, "p1")) << "a remembered entity was passivated for idleness";

  ASSERT_TRUE(operator_.move("p1", "p2", shardsOf(ids)));
  EXPECT_TRUE(waitFor([&] { return allActiveOn(ids, "p2"); }, kRestartBound))
      << "not running again on p2 within " << kRestartBound.count() << " s";
  for (const auto& id : ids) EXPECT_EQ(apps_[1]->received(id), 0) << id << " got a message";
  // They run from their saved state: the next message finds it.
  auto r = increment(*sidecars_[2], ids[0]);
  ASSERT_TRUE(r.ok() && r->status == 200);
  EXPECT_EQ(json::parse(r->body)["value"], 2);
  expectNoViolation();
}

TEST_F(RememberedComponentTest, AfterItsPodDiesARememberedEntityRunsAgainOnTheNextOwner) {
  const auto ids = idsOn("p3", 3);
  for (const auto& id : ids) {
    auto r = increment(*sidecars_[0], id);
    ASSERT_TRUE(r.ok() && r->status == 200) << id;
  }
  ASSERT_TRUE(allActiveOn(ids, "p3"));
  sidecars_[2]->process->signal(SIGKILL);
  ASSERT_EQ(sidecars_[2]->process->wait(seconds(10)), 128 + SIGKILL);
  appDies("p3");
  operator_.reassignFromDead("p3", "p1", operator_.shardsOf("p3"));
  EXPECT_TRUE(waitFor([&] { return allActiveOn(ids, "p1"); }, kRestartBound))
      << "not running again on p1 within " << kRestartBound.count() << " s";
  for (const auto& id : ids) EXPECT_EQ(apps_[0]->received(id), 0) << id << " got a message";
  expectNoViolation();
}

}  // namespace
}  // namespace kshard::sidecar
