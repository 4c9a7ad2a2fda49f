#include "sidecar/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <nlohmann/json.hpp>

#include "metrics/prometheus_registry.h"
#include "protocol/wire.h"
#include "tests/sidecar/held_host.h"
#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::HeldHost;
using ::testing::IsEmpty;
using testing::makeMap;

class HeldPeers : public PeerClient {
 public:
  struct Call {
    RouteOwner owner;
    Message message;
    Epoch epoch;
    Duration timeout;
    PeerClient::ForwardCallback done;
    SteadyTime at;
  };
  explicit HeldPeers(const Clock& clock) : clock_(clock) {}
  void forward(const RouteOwner& owner, std::shared_ptr<const Message> message, Epoch epoch,
               Duration timeout, PeerClient::ForwardCallback done) override {
    calls.push_back({owner, *message, epoch, timeout, std::move(done), clock_.now()});
  }
  void publish(const RouteOwner&, std::shared_ptr<const Publication>, Duration,
               PeerClient::ForwardCallback) override {
    ADD_FAILURE() << "the router published";
  }
  void complete(ForwardOutcome outcome, int status = 200, std::string body = "") {
    ASSERT_FALSE(calls.empty()) << "no forward is in flight";
    Call c = std::move(calls.front());
    calls.pop_front();
    ForwardResult r;
    r.outcome = outcome;
    r.response.status = status;
    r.response.body = std::move(body);
    r.detail = "test";
    c.done(std::move(r));
  }
  std::deque<Call> calls;

 private:
  const Clock& clock_;
};

class RecordingReporter : public UnhealthyReporter {
 public:
  void reportUnreachable(const std::string& pod) override { pods.push_back(pod); }
  std::vector<std::string> pods;
};

Message msg(ShardId shard, std::string body = "b") {
  Message m;
  m.key = {"counter", "a"};
  m.shard = shard;
  m.body = std::move(body);
  return m;
}

class RouterTest : public ::testing::Test {
 protected:
  RouterTest()
      : peers_(scheduler_.clock()),
        metrics_(registry_),
        router_(table_, entities_, peers_, reporter_, scheduler_, random_, {"p1"}, metrics_,
                Logger("test", LogLevel::kError)) {}

  void send(ShardId shard, Duration timeout = seconds(10)) {
    router_.send(msg(shard), timeout,
                 [this](http::Response r) { answers_.push_back(std::move(r)); });
  }
  // A second router, over `entities` instead of the fixture's registry (same table and peers).
  Router routerOver(EntityRegistry& entities) {
    return Router(table_, entities, peers_, reporter_, scheduler_, random_, {"p1"}, metrics_,
                  Logger("test", LogLevel::kError));
  }
  // A callback that keeps each answer in answers_.
  Router::Done recordAnswer() {
    return [this](http::Response r) { answers_.push_back(std::move(r)); };
  }
  std::string errorCode(const http::Response& r) {
    return nlohmann::json::parse(r.body)["error"]["code"].get<std::string>();
  }

  ManualScheduler scheduler_;
  HeldHost host_;
  EntityRegistry entities_{host_, scheduler_, {}, Logger("test", LogLevel::kError)};
  RoutingTable table_;
  HeldPeers peers_;
  RecordingReporter reporter_;
  SeededRandom random_{1};
  metrics::PrometheusRegistry registry_;
  SidecarMetrics metrics_;
  Router router_;
  std::vector<http::Response> answers_;
};

TEST_F(RouterTest, DeliversLocallyWhenThisPodOwnsTheShard) {
  ASSERT_THAT(entities_.assign({3}, 1), IsEmpty());
  send(3);
  ASSERT_EQ(host_.deliveries.size(), 1u);
  EXPECT_TRUE(peers_.calls.empty());
  host_.completeDelivery(201);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status, 201);
  EXPECT_EQ(answers_[0].headers.get(protocol::kOwnerHeader), "p1");
}

TEST_F(RouterTest, ForwardsToTheOwnerInTheMapWithTheMapEpoch) {
  ASSERT_TRUE(table_.update(makeMap(10, 8, {{"p1", "1-5"}, {"p2", "6-10"}})));
  send(7);
  ASSERT_EQ(peers_.calls.size(), 1u);
  EXPECT_EQ(peers_.calls[0].owner.pod, "p2");
  EXPECT_EQ(peers_.calls[0].owner.address, "10.0.0.2:7101");
  EXPECT_EQ(peers_.calls[0].epoch, 8u);
  peers_.complete(ForwardOutcome::kAnswered, 200, "ok");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].body, "ok");
}

TEST_F(RouterTest, WaitsForAnOwnerThenDelivers) {
  send(7);
  EXPECT_TRUE(peers_.calls.empty());
  scheduler_.advance(milliseconds(100));
  EXPECT_TRUE(answers_.empty());
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  scheduler_.advance(milliseconds(600));
  ASSERT_EQ(peers_.calls.size(), 1u) << "the new owner was not tried";
  peers_.complete(ForwardOutcome::kAnswered);
  EXPECT_EQ(answers_.size(), 1u);
}

TEST_F(RouterTest, RetriesARefusalUntilTheNextOwnerAccepts) {
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  send(7);
  peers_.complete(ForwardOutcome::kNotManaged, 409);
  EXPECT_TRUE(answers_.empty()) << "a refusal went back to the app";
  ASSERT_TRUE(table_.update(makeMap(10, 3, {{"p3", "1-10"}})));
  scheduler_.advance(milliseconds(50));
  ASSERT_EQ(peers_.calls.size(), 1u);
  EXPECT_EQ(peers_.calls[0].owner.pod, "p3");
  peers_.complete(ForwardOutcome::kAnswered);
  EXPECT_EQ(answers_.size(), 1u);
}

TEST_F(RouterTest, ReportsAnUnreachableOwnerAndRetries) {
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  send(7);
  peers_.complete(ForwardOutcome::kUnreachable);
  EXPECT_EQ(reporter_.pods, std::vector<std::string>{"p2"});
  scheduler_.advance(milliseconds(50));
  EXPECT_EQ(peers_.calls.size(), 1u);
}

TEST_F(RouterTest, RetriesAnOwnerThatCannotVerifyTheSenderYetWithoutReportingIt) {
  // 401 or 503 AuthenticationUnavailable from the owner: nothing was delivered (the sender's
  // token is rotating, or the owner has not seen this pod's registration yet).
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  send(7);
  peers_.complete(ForwardOutcome::kCallerRefused, 503);
  EXPECT_TRUE(answers_.empty()) << "a refusal of the sender went back to the app";
  EXPECT_TRUE(reporter_.pods.empty()) << "the owner answered; it is not unhealthy";
  scheduler_.advance(milliseconds(50));
  ASSERT_EQ(peers_.calls.size(), 1u);
  EXPECT_EQ(peers_.calls[0].owner.pod, "p2");
  peers_.complete(ForwardOutcome::kAnswered);
  EXPECT_EQ(answers_.size(), 1u);
}

TEST_F(RouterTest, BackoffDoublesUpToItsCapWithJitter) {
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  send(7, seconds(60));
  Duration backoff = milliseconds(10);
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(peers_.calls.size(), 1u);
    peers_.complete(ForwardOutcome::kNotManaged, 409);
    const SteadyTime refusedAt = scheduler_.clock().now();
    for (int step = 0; step < 1000 && peers_.calls.empty(); ++step) {
      scheduler_.advance(milliseconds(1));
    }
    ASSERT_EQ(peers_.calls.size(), 1u) << "no retry within 1 s after attempt " << i + 1;
    const Duration wait = peers_.calls[0].at - refusedAt;
    // Equal jitter: the wait for backoff b lies in [b/2, b] (plus the 1 ms step).
    EXPECT_GE(wait, backoff / 2) << "retry " << i + 1;
    EXPECT_LE(wait, backoff + milliseconds(1)) << "retry " << i + 1;
    backoff = std::min<Duration>(backoff * 2, milliseconds(500));
  }
  EXPECT_TRUE(answers_.empty());
}

TEST_F(RouterTest, GivesUpWithSendTimeoutAfterTheDeadline) {
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  send(7, seconds(2));
  for (int i = 0; i < 100 && answers_.empty(); ++i) {
    if (!peers_.calls.empty()) peers_.complete(ForwardOutcome::kNotManaged, 409);
    scheduler_.advance(milliseconds(100));
  }
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status, 504);
  EXPECT_EQ(errorCode(answers_[0]), "SendTimeout");
  EXPECT_EQ(answers_[0].headers.get(protocol::kErrorHeader), "SendTimeout");
  EXPECT_LE(scheduler_.clock().now().time_since_epoch(), seconds(2) + milliseconds(100));
}

TEST_F(RouterTest, DoesNotRetryWhenTheMessageMayHaveArrived) {
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p2", "1-10"}})));
  send(7);
  peers_.complete(ForwardOutcome::kFailed);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status, 502);
  EXPECT_EQ(errorCode(answers_[0]), "OutcomeUnknown");
  scheduler_.advance(seconds(5));
  EXPECT_TRUE(peers_.calls.empty()) << "an ambiguous failure was retried";
}

TEST_F(RouterTest, LocalRefusalDuringHandoffIsRetriedWithTheNextOwner) {
  ASSERT_THAT(entities_.assign({3}, 1), IsEmpty());
  ASSERT_TRUE(table_.update(makeMap(10, 1, {{"p1", "1-10"}})));
  entities_.deliver(msg(3), [](DeliveryOutcome) {});  // keeps the shard busy
  entities_.unassign({3}, 2, seconds(30), [](std::vector<ShardId>) {});
  send(3);
  EXPECT_TRUE(answers_.empty());
  ASSERT_TRUE(table_.update(makeMap(10, 2, {{"p1", "1-2,4-10"}, {"p2", "3"}})));
  scheduler_.advance(milliseconds(50));
  ASSERT_EQ(peers_.calls.size(), 1u);
  EXPECT_EQ(peers_.calls[0].owner.pod, "p2");
}

TEST_F(RouterTest, ATellOverTheBacklogIsAnswered503AndNotRetried) {
  EntityRegistryOptions o;
  o.maxPendingTells = 1;
  EntityRegistry small(host_, scheduler_, o, Logger("test", LogLevel::kError));
  Router r = routerOver(small);
  ASSERT_THAT(small.assign({3}, 1), IsEmpty());
  for (int i = 0; i < 2; ++i) {
    Message m = msg(3);
    m.key.id = "e" + std::to_string(i);
    m.mode = DeliveryMode::kTell;
    r.send(std::move(m), seconds(10), recordAnswer());
  }
  ASSERT_EQ(answers_.size(), 2u);
  EXPECT_EQ(answers_[0].status, 202);
  EXPECT_EQ(answers_[1].status, 503);
  EXPECT_EQ(errorCode(answers_[1]), "EntityOverloaded");
  EXPECT_NE(answers_[1].body.find("too many tell messages"), std::string::npos) << answers_[1].body;
  EXPECT_EQ(scheduler_.pending(), 0u) << "the refused tell was scheduled for a retry";
  host_.completeDelivery();
}

TEST_F(RouterTest, OverloadedEntityIsNotRetried) {
  EntityRegistryOptions o;
  o.maxMailbox = 1;
  EntityRegistry small(host_, scheduler_, o, Logger("test", LogLevel::kError));
  Router r = routerOver(small);
  ASSERT_THAT(small.assign({3}, 1), IsEmpty());
  for (int i = 0; i < 3; ++i) {
    r.send(msg(3), seconds(10), recordAnswer());
  }
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status, 503);
  EXPECT_EQ(errorCode(answers_[0]), "EntityOverloaded");
  host_.completeDelivery();
  host_.completeDelivery();
}

}  // namespace
}  // namespace kshard::sidecar
