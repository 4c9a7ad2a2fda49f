#include "kube/service_account_tokens.h"

#include <gtest/gtest.h>

#include <optional>

#include "kube/api_time.h"
#include "tests/kube/fake_transport.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::FakeTransport;
using testing::jsonResponse;

constexpr char kTokenPath[] = "/api/v1/namespaces/kshard-system/serviceaccounts/kshard/token";

class ServiceAccountTokensTest : public ::testing::Test {
 protected:
  ServiceAccountTokensTest() {
    ClientOptions o;
    o.qps = 0;
    o.maxRetries = 0;
    client_ = std::make_unique<Client>(transport_, scheduler_, random_, logger_, o);
    tokens_ = std::make_unique<ServiceAccountTokens>(
        *client_, scheduler_.clock(),
        ServiceAccountTokensOptions{.ns = "kshard-system", .name = "kshard", .lifetime = 20min});
    // Answers like the API server: a token naming its audience and a serial, valid as asked.
    transport_.setHandler(
        [this](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
          if (failing_) return StatusOr<http::Response>(unavailable("connection refused"));
          if (parking_) return std::nullopt;
          return mintAnswer(r);
        });
  }

  http::Response mintAnswer(const http::Request& r) {
    const json body = json::parse(r.body);
    const auto seconds = body["spec"]["expirationSeconds"].get<std::int64_t>();
    const std::string audience = body["spec"]["audiences"][0].get<std::string>();
    ++serial_;
    const json answer = {{"kind", "TokenRequest"},
                         {"status",
                          {{"token", audience + "#" + std::to_string(serial_)},
                           {"expirationTimestamp", formatTime(scheduler_.clock().wallNow() +
                                                              std::chrono::seconds(seconds))}}}};
    return jsonResponse(201, answer.dump());
  }

  StatusOr<std::string> get(const std::string& audience) {
    std::optional<StatusOr<std::string>> got;
    tokens_->get(audience, [&](StatusOr<std::string> t) { got = std::move(t); });
    scheduler_.runDue();
    EXPECT_TRUE(got.has_value()) << "get() did not answer";
    return got.value_or(internalError("no answer"));
  }

  ManualScheduler scheduler_;
  FakeTransport transport_;
  SeededRandom random_{1};
  Logger logger_{"kube-test", LogLevel::kError, [](std::string_view) {}};
  std::unique_ptr<Client> client_;
  std::unique_ptr<ServiceAccountTokens> tokens_;
  bool failing_ = false;
  bool parking_ = false;
  int serial_ = 0;
};

TEST_F(ServiceAccountTokensTest, MintsATokenForTheAudienceWithTokenRequestOnItsOwnAccount) {
  auto token = get("kshard.io/sidecar/demo/counter");
  ASSERT_TRUE(token.ok()) << token.status().toString();
  EXPECT_EQ(*token, "kshard.io/sidecar/demo/counter#1");
  ASSERT_EQ(transport_.requestCount(), 1u);
  const http::Request sent = transport_.requests()[0];
  EXPECT_EQ(sent.method, http::Method::kPost);
  EXPECT_EQ(sent.target, kTokenPath);
  EXPECT_EQ(
      json::parse(sent.body),
      (json{{"apiVersion", "authentication.k8s.io/v1"},
            {"kind", "TokenRequest"},
            {"spec",
             {{"audiences", {"kshard.io/sidecar/demo/counter"}}, {"expirationSeconds", 1200}}}}));
}

TEST_F(ServiceAccountTokensTest, KeepsEachAudiencesTokenForHalfItsLifetime) {
  EXPECT_EQ(*get("kshard.io/sidecar/demo/a"), "kshard.io/sidecar/demo/a#1");
  EXPECT_EQ(*get("kshard.io/sidecar/demo/b"), "kshard.io/sidecar/demo/b#2");
  scheduler_.advance(9min);
  EXPECT_EQ(*get("kshard.io/sidecar/demo/a"), "kshard.io/sidecar/demo/a#1");
  EXPECT_EQ(tokens_->minted(), 2u);
  scheduler_.advance(1min + 1s);
  EXPECT_EQ(*get("kshard.io/sidecar/demo/a"), "kshard.io/sidecar/demo/a#3");
  EXPECT_EQ(tokens_->minted(), 3u);
}

TEST_F(ServiceAccountTokensTest, CallersOfOneAudienceWhileItIsMintedShareOneRequest) {
  parking_ = true;
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    tokens_->get("kshard.io/sidecar/demo/counter", [&](StatusOr<std::string> t) {
      ASSERT_TRUE(t.ok()) << t.status().toString();
      got.push_back(*t);
    });
    scheduler_.runDue();
  }
  ASSERT_TRUE(transport_.waitForParked(1));
  EXPECT_EQ(transport_.requestCount(), 1u);
  EXPECT_TRUE(got.empty());
  transport_.answer(mintAnswer(transport_.parkedRequest()));
  EXPECT_EQ(got, std::vector<std::string>(3, "kshard.io/sidecar/demo/counter#1"));
}

TEST_F(ServiceAccountTokensTest, AFailedMintGivesTheKeptTokenUntilItExpiresThenTheError) {
  ASSERT_TRUE(get("kshard.io/sidecar/demo/counter").ok());
  failing_ = true;
  scheduler_.advance(15min);  // past half its lifetime: a new one is asked for, and fails
  auto kept = get("kshard.io/sidecar/demo/counter");
  ASSERT_TRUE(kept.ok()) << kept.status().toString();
  EXPECT_EQ(*kept, "kshard.io/sidecar/demo/counter#1");
  scheduler_.advance(5min);  // expired
  auto none = get("kshard.io/sidecar/demo/counter");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("kshard.io/sidecar/demo/counter"), std::string::npos)
      << none.status().toString();
  failing_ = false;
  EXPECT_EQ(*get("kshard.io/sidecar/demo/counter"), "kshard.io/sidecar/demo/counter#2");
}

TEST_F(ServiceAccountTokensTest, AnAnswerWithoutATokenIsAnError) {
  transport_.setHandler([](const http::Request&) -> std::optional<StatusOr<http::Response>> {
    return jsonResponse(201, R"({"kind":"TokenRequest","status":{}})");
  });
  auto token = get("kshard.io/sidecar/demo/counter");
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("status.token"), std::string::npos)
      << token.status().toString();
}

TEST_F(ServiceAccountTokensTest, KeepsAtMostMaxAudiences) {
  tokens_ = std::make_unique<ServiceAccountTokens>(
      *client_, scheduler_.clock(),
      ServiceAccountTokensOptions{.ns = "kshard-system", .name = "kshard", .maxAudiences = 2});
  EXPECT_TRUE(get("a").ok());
  EXPECT_TRUE(get("b").ok());
  EXPECT_TRUE(get("c").ok());  // the cache starts over: a and b are gone
  EXPECT_EQ(tokens_->minted(), 3u);
  EXPECT_TRUE(get("c").ok());
  EXPECT_EQ(tokens_->minted(), 3u);
  EXPECT_TRUE(get("a").ok());
  EXPECT_EQ(tokens_->minted(), 4u);
}

}  // namespace
}  // namespace kshard::kube
