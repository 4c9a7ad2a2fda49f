// ManagerClient against a scripted manager API on simulated time: the pod's token goes with every
// call (read again for each attempt), a 401 is retried (the kubelet may not have written or
// rotated the token yet), a malformed request is not.
#include "sidecar/manager_client.h"

#include <gtest/gtest.h>

#include <deque>

#include "base/scheduler.h"
#include "protocol/wire.h"
#include "tests/sidecar/scripted_client.h"

namespace kshard::sidecar {
namespace {

using namespace std::chrono_literals;
using testing::answer;
using testing::ScriptedClient;
using testing::ScriptedManager;

class ManagerClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<ManagerClient> client(std::function<std::string()> authorization) {
    return testing::scriptedManagerClient(manager_, table_, scheduler_, random_,
                                          Logger("t", LogLevel::kError, [](std::string_view) {}),
                                          std::move(authorization));
  }
  std::optional<std::string> authorizationOf(std::size_t i) const {
    auto v = manager_->seen.at(i).headers.get("Authorization");
    return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
  }

  std::shared_ptr<ScriptedManager> manager_ = std::make_shared<ScriptedManager>();
  RoutingTable table_;
  ManualScheduler scheduler_;
  SeededRandom random_{1};
};

TEST_F(ManagerClientTest, SendsTheCurrentTokenAndRetriesA401) {
  int reads = 0;
  auto c = client([&reads] { return "Bearer token-" + std::to_string(++reads); });
  manager_->answers = {
      answer(401, R"({"error":{"code":"Unauthenticated","message":"token has expired"}})"),
      answer(200, R"({"epoch":7})")};
  std::optional<StatusOr<std::uint64_t>> result;
  c->registerPod([&](StatusOr<std::uint64_t> r) { result = std::move(r); });
  for (int i = 0; i < 100 && !result; ++i) scheduler_.advance(100ms);
  ASSERT_TRUE(result.has_value()) << "the register was not retried after the 401";
  ASSERT_TRUE(result->ok()) << result->status().toString();
  EXPECT_EQ(**result, 7u);
  ASSERT_EQ(manager_->seen.size(), 2u);
  EXPECT_EQ(authorizationOf(0), "Bearer token-1");
  EXPECT_EQ(authorizationOf(1), "Bearer token-2") << "the token is read again for each attempt";
  EXPECT_EQ(manager_->seen[0].target, "/v1/shardmaps/demo/counter/register");
  c->stop();
}

TEST_F(ManagerClientTest, AMalformedRequestIsNotRetried) {
  auto c = client([] { return std::string("Bearer t"); });
  manager_->answers = {answer(400, R"({"error":{"code":"BadRequest","message":"uid: missing"}})")};
  std::optional<StatusOr<std::uint64_t>> result;
  c->registerPod([&](StatusOr<std::uint64_t> r) { result = std::move(r); });
  scheduler_.advance(10s);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->seen.size(), 1u);
  c->stop();
}

TEST_F(ManagerClientTest, NoTokenNoAuthorizationHeader) {
  auto c = client([] { return std::string(); });
  manager_->answers = {answer(200, R"({"epoch":1})")};
  std::optional<StatusOr<std::uint64_t>> result;
  c->registerPod([&](StatusOr<std::uint64_t> r) { result = std::move(r); });
  scheduler_.runDue();
  ASSERT_TRUE(result.has_value() && result->ok());
  EXPECT_EQ(authorizationOf(0), std::nullopt);
  c->stop();
}

std::string deferral(std::int64_t retryAfterMs, std::int64_t deferredForMs) {
  protocol::UnregisterDeferred d;
  d.message = "waiting for pods of version 2.0.0";
  d.retryAfterMs = retryAfterMs;
  d.deferredForMs = deferredForMs;
  d.version = "2.0.0";
  d.startingPods = 3;
  return protocol::encode(d);
}

TEST_F(ManagerClientTest, AHeldUnregisterAsksAgainWhenToldAndOutlastsItsTimeout) {
  auto c = client([] { return std::string("Bearer t"); });
  // Held for 20 s, asked again every 2 s: longer than the call's own 15 s timeout.
  for (int i = 0; i < 10; ++i) manager_->answers.push_back(answer(409, deferral(2000, 60'000)));
  manager_->answers.push_back(answer(200, R"({"epoch":9})"));
  std::optional<Status> result;
  c->unregisterPod(15s, [&](StatusOr<protocol::EpochResponse> s) { result = s.status(); });
  EXPECT_EQ(manager_->seen.size(), 1u);
  // Each attempt may take the whole timeout: the manager answers after the handoff.
  EXPECT_EQ(manager_->seen[0].timeout, 15s);
  scheduler_.advance(4050ms);
  EXPECT_EQ(manager_->seen.size(), 3u) << "asked again after the manager's 2 s, not a backoff";
  for (int i = 0; i < 300 && !result; ++i) scheduler_.advance(100ms);
  ASSERT_TRUE(result.has_value()) << "the held unregister never ended";
  EXPECT_TRUE(result->ok()) << result->toString();
  EXPECT_EQ(manager_->seen.size(), 11u);
  EXPECT_EQ(manager_->seen.back().target, "/v1/shardmaps/demo/counter/unregister");
  c->stop();
}

TEST_F(ManagerClientTest, AHoldEndsTheUnregisterAtTheAnnouncedHoldPlusTheTimeout) {
  auto c = client([] { return std::string("Bearer t"); });
  // The manager announces a hold of 3 s, then keeps deferring without announcing any more (it
  // would not; only an announced hold moves the deadline).
  manager_->answers.push_back(answer(409, deferral(1000, 3000)));
  for (int i = 0; i < 100; ++i) manager_->answers.push_back(answer(409, deferral(1000, 0)));
  std::optional<Status> result;
  const auto start = scheduler_.clock().now();
  c->unregisterPod(5s, [&](StatusOr<protocol::EpochResponse> s) { result = s.status(); });
  for (int i = 0; i < 1000 && !result; ++i) scheduler_.advance(100ms);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), StatusCode::kDeadlineExceeded) << result->toString();
  const auto took = scheduler_.clock().now() - start;
  EXPECT_GE(took, 7s);
  EXPECT_LE(took, 9s) << "the deadline kept moving out";
  c->stop();
}

TEST_F(ManagerClientTest, NoHoldLastsLongerThanTenMinutesWhateverTheManagerSays) {
  auto c = client([] { return std::string("Bearer t"); });
  for (int i = 0; i < 700; ++i) manager_->answers.push_back(answer(409, deferral(1000, 60'000)));
  std::optional<Status> result;
  const auto start = scheduler_.clock().now();
  c->unregisterPod(5s, [&](StatusOr<protocol::EpochResponse> s) { result = s.status(); });
  for (int i = 0; i < 1000 && !result; ++i) scheduler_.advance(1s);
  ASSERT_TRUE(result.has_value()) << "the unregister was held for ever";
  EXPECT_EQ(result->code(), StatusCode::kDeadlineExceeded) << result->toString();
  const auto took = scheduler_.clock().now() - start;
  EXPECT_GE(took, 10min);
  EXPECT_LE(took, 10min + 6s);
  c->stop();
}

TEST_F(ManagerClientTest, AnOther409IsRetriedWithBackoffAsBefore) {
  auto c = client([] { return std::string("Bearer t"); });
  manager_->answers = {answer(409, R"({"error":{"code":"Conflict","message":"try again"}})"),
                       answer(200, R"({"epoch":2})")};
  std::optional<Status> result;
  c->unregisterPod(5s, [&](StatusOr<protocol::EpochResponse> s) { result = s.status(); });
  for (int i = 0; i < 50 && !result; ++i) scheduler_.advance(100ms);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << result->toString();
  c->stop();
}

}  // namespace
}  // namespace kshard::sidecar
