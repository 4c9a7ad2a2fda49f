// Component test of spec.maxActiveEntitiesPerPod with real sidecars (tests/sidecar/
// component_fixture.h): a flood of new entity ids, asks and tells, through every sidecar while
// shards move; the stub apps' record shows that no pod's app ever ran more entities at once than
// the limit, and that every acknowledged message was applied.
#include "tests/sidecar/component_fixture.h"

namespace kshard::sidecar {
namespace {

constexpr std::int32_t kLimit = 4;

class SidecarEntityLimitTest : public SidecarComponentTest {
 protected:
  void configureMap(sharding::ShardMapSpec& spec) override {
    spec.maxActiveEntitiesPerPod = kLimit;
    spec.entityIdleTimeout = seconds(60);  // only the limit (and the moves) stop entities
  }
  StatusOr<http::Response> send(Sidecar& sc, const std::string& id, bool tell) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/v1/entities/counter/" + id + (tell ? "?mode=tell" : "");
    r.body = R"({"op":"increment"})";
    return sc.api->sendSync(std::move(r));
  }
  // The counter's value as the apps hold it: live where it runs, else as saved by its stop.
  long valueLocked(const std::string& id) {
    auto on = world_.activeOn.find(id);
    if (on != world_.activeOn.end()) return world_.live[on->second][id];
    return world_.saved.count(id) ? world_.saved.at(id) : 0;
  }
};

TEST_F(SidecarEntityLimitTest, AFloodOfNewEntitiesNeverPassesTheLimitAndLosesNothing) {
  for (auto& app : apps_) app->delayStops(milliseconds(20));  // stops overlap new arrivals
  constexpr int kThreads = 6;
  constexpr int kIdsPerThread = 30;
  constexpr int kRounds = 2;
  std::mutex mu;
  std::map<std::string, long> acked;  // acknowledged increments (200 or 202) per entity
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t + 11));
      for (int round = 0; round < kRounds; ++round) {
        for (int k = 0; k < kIdsPerThread; ++k) {
          const std::string id = "flood-" + std::to_string(t) + "-" + std::to_string(k);
          const bool tell = (k + round) % 2 == 1;
          auto r = send(*sidecars_[rng() % sidecars_.size()], id, tell);
          std::lock_guard lock(mu);
          if (r.ok() && r->status == (tell ? 202 : 200)) {
            ++acked[id];
          } else {
            failures.push_back(
                id + (tell ? " (tell): " : " (ask): ") +
                (r.ok() ? std::to_string(r->status) + " " + r->body : r.status().toString()));
          }
        }
      }
    });
  }
  // Shards move meanwhile: a handoff refuses its waiting entities, whose senders retry.
  std::mt19937 rng(3);
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(milliseconds(200));
    const auto pods = operator_.pods();
    const std::string from = pods[round % pods.size()];
    const std::string to = pods[(round + 1) % pods.size()];
    auto owned = operator_.shardsOf(from);
    std::shuffle(owned.begin(), owned.end(), rng);
    owned.resize(std::min<std::size_t>(owned.size(), 4));
    EXPECT_TRUE(operator_.move(from, to, owned)) << "unassign of " << from << " failed";
  }
  for (auto& th : threads) th.join();

  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  // Tells are applied after their 202: wait until every acknowledged increment is there.
  std::string missing;
  const bool complete = waitFor(
      [&] {
        std::lock_guard lock(world_.mu);
        missing.clear();
        for (const auto& [id, n] : acked) {
          if (valueLocked(id) != n) {
            missing = id + " holds " + std::to_string(valueLocked(id)) + ", " + std::to_string(n) +
                      " acknowledged";
            return false;
          }
        }
        return true;
      },
      seconds(10));
  EXPECT_TRUE(complete) << "an acknowledged message was lost: " << missing;
  EXPECT_EQ(acked.size(), static_cast<std::size_t>(kThreads * kIdsPerThread));

  std::lock_guard lock(world_.mu);
  EXPECT_TRUE(world_.violations.empty())
      << world_.violations.size() << " violations, first: " << world_.violations.front();
  std::size_t most = 0;
  for (const auto& sc : sidecars_) {
    EXPECT_LE(world_.mostLive[sc->pod], static_cast<std::size_t>(kLimit))
        << sc->pod << "'s app ran more entities at once than maxActiveEntitiesPerPod";
    most = std::max(most, world_.mostLive[sc->pod]);
  }
  EXPECT_EQ(most, static_cast<std::size_t>(kLimit)) << "no pod reached the limit: nothing tested";
}

TEST_F(SidecarEntityLimitTest, TheLimitsPassivationsAndWaitingEntitiesAreExported) {
  Sidecar& sc = *sidecars_[0];
  // Entities of p1's shards, more than the limit, one after another: each beyond it waits for
  // the least recently used one to stop.
  std::vector<std::string> ids;
  for (int i = 0; ids.size() < static_cast<std::size_t>(kLimit) + 3; ++i) {
    const std::string id = "metered-" + std::to_string(i);
    if (operator_.ownerOf(*sharding::shardIdOf(id, kShards)) == sc.pod) ids.push_back(id);
  }
  for (const auto& id : ids) {
    auto r = send(sc, id, false);
    ASSERT_TRUE(r.ok() && r->status == 200) << id << ": " << (r.ok() ? r->body : "no answer");
  }
  EXPECT_EQ(metric(sc, "kshard_sidecar_entity_limit_passivations_total"), 3.0);
  EXPECT_EQ(metric(sc, "kshard_sidecar_waiting_entities"), 0.0);
  EXPECT_EQ(metric(sc, R"(kshard_sidecar_active_entities{type="counter"})"),
            static_cast<double>(kLimit));
  std::lock_guard lock(world_.mu);
  EXPECT_EQ(world_.live[sc.pod].size(), static_cast<std::size_t>(kLimit));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(world_.saved[ids[i]], 1) << "the least recently used were not the ones stopped";
  }
}

}  // namespace
}  // namespace kshard::sidecar
