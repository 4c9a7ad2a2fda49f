// SidecarServer in this process, in front of a stub app, with the stub operator of the component
// tests: its readiness before and after start, the drain a stop signal starts, and stop.
#include "sidecar/sidecar_server.h"

#include <gtest/gtest.h>

#include <future>

#include "tests/sidecar/component_fixture.h"
#include "tests/support/get_status.h"

namespace kshard::sidecar {
namespace {

class SidecarServerTest : public ::testing::Test {
 protected:
  SidecarServerTest() : app_("p1", world_) {
    cfg_.podName = "p1";
    cfg_.podNamespace = "demo";
    cfg_.podUid = "uid-p1";
    cfg_.podIp = "127.0.0.1";
    cfg_.shardMap = "counter";
    cfg_.version = "1.0.0";
    cfg_.appPort = app_.port();
    cfg_.apiPort = freeLoopbackPort();
    cfg_.peerPort = freeLoopbackPort();
    cfg_.adminPort = freeLoopbackPort();
    cfg_.adminBindAddress = "127.0.0.1";
    cfg_.mapSource = "manager";
    cfg_.managerAddress = operator_.address();
    cfg_.mapPollInterval = milliseconds(100);
    cfg_.peerAuth = "none";
    EXPECT_TRUE(cfg_.validate().ok());
    admin_ = client("127.0.0.1:" + std::to_string(cfg_.adminPort));
    api_ = client("127.0.0.1:" + std::to_string(cfg_.apiPort));
  }

  std::unique_ptr<SidecarServer> build() {
    Identity self = cfg_.identity();
    self.incarnation = "i1";
    auto server = SidecarServer::build(cfg_, self, Logger("sidecar", LogLevel::kWarn));
    EXPECT_TRUE(server.ok()) << server.status().toString();
    return server.ok() ? std::move(*server) : nullptr;
  }
  // /readyz's status code, or 0 when the admin port does not answer.
  int readyz() { return kshard::testing::getStatus(*admin_, "/readyz"); }
  Status drain(SidecarServer& server) {
    std::promise<Status> done;
    server.drain([&done](Status st) { done.set_value(std::move(st)); });
    auto result = done.get_future();
    EXPECT_EQ(result.wait_for(seconds(30)), std::future_status::ready);
    return result.get();
  }
  StatusOr<http::Response> increment(const std::string& id) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/v1/entities/counter/" + id;
    r.body = R"({"op":"increment"})";
    return api_->sendSync(std::move(r));
  }

  World world_;
  StubOperator operator_;
  StubApp app_;
  SidecarConfig cfg_;
  std::unique_ptr<http::Client> admin_;
  std::unique_ptr<http::Client> api_;
};

TEST_F(SidecarServerTest, NotReadyBeforeStartAndReadyOnceRegistered) {
  auto server = build();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->notReadyReason(), "ShardMap not loaded yet");
  EXPECT_EQ(readyz(), 0) << "nothing listens before start()";
  EXPECT_TRUE(operator_.pods().empty());

  ASSERT_TRUE(server->start().ok());
  ASSERT_TRUE(waitFor([&] { return readyz() == 200; }, seconds(30)));
  EXPECT_EQ(server->notReadyReason(), "");
  EXPECT_EQ(operator_.pods(), std::vector<std::string>{"p1"});
  EXPECT_EQ(app_.resets(), 1) << "the app is reset before the pod registers";
  server->stop();
}

TEST_F(SidecarServerTest, DrainHandsTheShardsBackAndTurnsReadinessOff) {
  auto server = build();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->start().ok());
  ASSERT_TRUE(waitFor([&] { return readyz() == 200; }, seconds(30)));
  operator_.placeUnassigned();
  ASSERT_EQ(operator_.shardsOf("p1").size(), static_cast<std::size_t>(kShards));
  ASSERT_TRUE(waitFor(
      [&] {
        auto r = increment("e1");
        return r.ok() && r->status == 200;
      },
      seconds(10)));

  EXPECT_TRUE(drain(*server).ok());
  EXPECT_EQ(server->notReadyReason(), "draining");
  EXPECT_EQ(readyz(), 503);
  for (sharding::ShardId s = 1; s <= kShards; ++s) EXPECT_EQ(operator_.ownerOf(s), "") << s;
  EXPECT_TRUE(operator_.pods().empty()) << "the drain unregisters the pod";
  {
    std::lock_guard lock(world_.mu);
    EXPECT_EQ(world_.saved["e1"], 1) << "the entity was stopped and saved its state";
    EXPECT_TRUE(world_.violations.empty());
  }
  server->stop();
}

TEST_F(SidecarServerTest, DrainBeforeRegistrationEndsAtOnce) {
  cfg_.managerAddress = "127.0.0.1:" + std::to_string(freeLoopbackPort());  // nobody there
  auto server = build();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->start().ok());
  EXPECT_TRUE(drain(*server).ok());
  EXPECT_EQ(readyz(), 503);
  server->stop();
}

TEST_F(SidecarServerTest, StopClosesEveryPortAndIsIdempotent) {
  auto server = build();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->start().ok());
  ASSERT_TRUE(waitFor([&] { return readyz() == 200; }, seconds(30)));
  EXPECT_TRUE(drain(*server).ok());
  server->stop();
  EXPECT_EQ(readyz(), 0);
  auto r = increment("e1");
  EXPECT_FALSE(r.ok()) << "the app API is closed";
  server->stop();
}

TEST_F(SidecarServerTest, StartFailsWhenAPortIsTaken) {
  auto first = build();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->start().ok());
  auto second = build();
  ASSERT_NE(second, nullptr);
  EXPECT_FALSE(second->start().ok());
  second->stop();
  first->stop();
}

TEST_F(SidecarServerTest, BuildRefusesAnUnreadablePreStopHook) {
  cfg_.appPreStop = "{not json";
  Identity self = cfg_.identity();
  auto server = SidecarServer::build(cfg_, self, Logger("sidecar", LogLevel::kError));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kshard::sidecar
