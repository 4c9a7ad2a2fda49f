// The manager API's routing and answers (leader check, ShardMap lookup, body validation,
// metrics), with a ShardManager over the fakes, called without a socket.
#include "operator/manager_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "operator/shard_manager.h"
#include "sharding/shard_map_json.h"
#include "tests/operator/controller_harness.h"

namespace kshard::manager::testing {
namespace {

using namespace std::chrono_literals;

// Controller dependencies over the harness's fakes, with `leadership`.
ControllerDeps depsOf(ControllerHarness& h, FakeLeadership& leadership) {
  return ControllerDeps{h.scheduler,
                        h.random,
                        h.store,
                        h.pods,
                        h.directory,
                        leadership,
                        h.events,
                        h.metrics,
                        Logger("t", LogLevel::kError, [](std::string_view) {}),
                        sharding::ManagerRef{"op-0", "10.0.0.1:7200"}};
}

class ManagerApiTest : public ::testing::Test {
 protected:
  ManagerApiTest()
      : deps_(depsOf(h_, leadership_)),
        manager_(deps_),
        api_(manager_, leadership_, h_.metrics, quiet()) {
    leadership_.holderName = "op-0";
    manager_.upsert(h_.stored());
    manager_.startLeading();
    EXPECT_TRUE(h_.runUntil([&] { return h_.stored().status.manager.has_value(); }, 5s));
  }
  ~ManagerApiTest() override {
    manager_.shutdown();
    h_.scheduler.runDue();
  }

  static Logger quiet() {
    return Logger("test", LogLevel::kError, [](std::string_view) {});
  }

  http::Response call(std::string_view verb, std::string ns, std::string name, std::string body) {
    http::Request req;
    req.method = verb == "assignments" ? http::Method::kGet : http::Method::kPost;
    req.params = {{"namespace", std::move(ns)}, {"name", std::move(name)}};
    req.body = std::move(body);
    auto out = std::make_shared<std::optional<http::Response>>();
    api_.handle(verb, std::move(req),
                http::Responder([out](http::Response r) { *out = std::move(r); }));
    EXPECT_TRUE(h_.runUntil([&] { return out->has_value(); }, 30s)) << "no answer to " << verb;
    return out->value_or(http::Response{0, {}, ""});
  }

  double requests(const std::string& verb, int code) {
    return h_.metrics.apiRequests().with({{"verb", verb}, {"code", std::to_string(code)}}).value();
  }

  ControllerHarness h_;
  FakeLeadership leadership_;
  ControllerDeps deps_;
  ShardManager manager_;
  ManagerApi api_;
};

TEST_F(ManagerApiTest, RegisterAnswersTheEpochAndIsCounted) {
  StubPod& a = h_.startPod("a");
  const std::string body =
      protocol::encode(protocol::RegisterRequest{a.name, a.uid, a.address, "1"});
  http::Response r = call("register", "demo", "counter", body);
  ASSERT_EQ(r.status, 200) << r.body;
  auto epoch = protocol::decodeEpochResponse(r.body);
  ASSERT_TRUE(epoch.ok()) << r.body;
  // The epoch of the write that recorded the pod (the round that follows may have moved on).
  EXPECT_GE(epoch->epoch, 1u);
  EXPECT_LE(epoch->epoch, static_cast<protocol::Epoch>(h_.stored().status.epoch));
  EXPECT_EQ(h_.stored().status.pods.size(), 1u);
  EXPECT_EQ(requests("register", 200), 1.0);
}

TEST_F(ManagerApiTest, FollowersAnswerNotLeaderWithTheLeadersAddress) {
  leadership_.leader = false;
  http::Response r = call("register", "demo", "counter", "{}");
  EXPECT_EQ(r.status, 503);
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "NotLeader");
  EXPECT_EQ(body["leader"], "10.0.0.1:7200");
  EXPECT_EQ(requests("register", 503), 1.0);
}

TEST_F(ManagerApiTest, FollowersOmitTheLeaderWhenTheStoredManagerIsNotTheHolder) {
  leadership_.leader = false;
  leadership_.holderName = "op-1";  // a new leader that has not written status.manager yet
  http::Response r = call("unregister", "demo", "counter", "{}");
  EXPECT_EQ(r.status, 503);
  EXPECT_FALSE(nlohmann::json::parse(r.body).contains("leader")) << r.body;
}

TEST_F(ManagerApiTest, UnknownShardMapIs404) {
  http::Response r = call("register", "demo", "nope", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("UnknownShardMap"), std::string::npos) << r.body;
}

TEST_F(ManagerApiTest, MalformedInputIs400NamingTheProblem) {
  http::Response bad = call("register", "demo", "counter", R"({"pod": "a"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("uid"), std::string::npos) << bad.body;
  http::Response notJson = call("notify-unhealthy", "demo", "counter", "{");
  EXPECT_EQ(notJson.status, 400);
  http::Response badName = call("register", "Demo_NS", "counter", "{}");
  EXPECT_EQ(badName.status, 400);
}

TEST_F(ManagerApiTest, AssignmentsServeTheMapAsTheLeaderHoldsIt) {
  http::Response r = call("assignments", "demo", "counter", "");
  ASSERT_EQ(r.status, 200);
  auto map = sharding::parseShardMap(r.body);
  ASSERT_TRUE(map.ok()) << map.status().toString();
  EXPECT_EQ(map->status.epoch, h_.stored().status.epoch);
  EXPECT_EQ(map->status.manager->pod, "op-0");
}

TEST_F(ManagerApiTest, NotifyUnhealthyIsAccepted) {
  http::Response r = call("notify-unhealthy", "demo", "counter",
                          protocol::encode(protocol::NotifyUnhealthyRequest{"x"}));
  EXPECT_EQ(r.status, 202);
}

TEST(ShardManager, DeletedShardMapsAreForgotten) {
  ControllerHarness h;
  FakeLeadership leadership;
  ShardManager manager(depsOf(h, leadership));
  manager.upsert(h.stored());
  ASSERT_NE(manager.find({kNamespace, kMapName}), nullptr);
  EXPECT_EQ(manager.shardMaps().size(), 1u);
  manager.remove({kNamespace, kMapName});
  EXPECT_EQ(manager.find({kNamespace, kMapName}), nullptr);
  h.scheduler.runDue();
}

// A relist after a delete and a create of the same name reports the new object as an update:
// the new uid gets a controller of its own, not the old one's pods and epochs.
TEST(ShardManager, ARecreatedShardMapGetsAFreshController) {
  ControllerHarness h;
  FakeLeadership leadership;
  ShardManager manager(depsOf(h, leadership));
  sharding::ShardMap first = h.stored();
  first.metadata.uid = "uid-1";
  manager.upsert(first);
  auto before = manager.find({kNamespace, kMapName});
  ASSERT_NE(before, nullptr);
  manager.upsert(first);  // the same object again: the same controller
  EXPECT_EQ(manager.find({kNamespace, kMapName}), before);
  sharding::ShardMap second = first;
  second.metadata.uid = "uid-2";
  manager.upsert(second);
  auto after = manager.find({kNamespace, kMapName});
  ASSERT_NE(after, nullptr);
  EXPECT_NE(after, before) << "a ShardMap with a new uid kept the old object's controller";
  EXPECT_EQ(manager.shardMaps().size(), 1u);
  manager.shutdown();
  h.scheduler.runDue();
}

TEST(ShardManager, ShardMapsSeenWhileLeadingAreTakenOver) {
  ControllerHarness h;
  FakeLeadership leadership;
  leadership.holderName = "op-0";
  ShardManager manager(depsOf(h, leadership));
  manager.startLeading();
  EXPECT_TRUE(manager.leading());
  manager.upsert(h.stored());
  EXPECT_TRUE(h.runUntil([&] { return h.stored().status.manager.has_value(); }, 5s))
      << "a ShardMap that appeared while leading was not taken over";
  manager.stopLeading();
  EXPECT_FALSE(manager.leading());
  manager.shutdown();
  h.scheduler.runDue();
}

}  // namespace
}  // namespace kshard::manager::testing
