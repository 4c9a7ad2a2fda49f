// The manager API's caller authentication: reading a TokenReview's answer, the bearer header,
// and the TokenReview round trip with its cache, against a fake API server transport.
#include "operator/pod_authenticator.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/scheduler.h"
#include "tests/kube/fake_transport.h"

namespace kshard::manager {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json reviewOf(const std::string& username, const std::string& pod, const std::string& uid,
              json audiences = json::array({"kshard"})) {
  json user = {{"username", username}, {"groups", json::array({"system:serviceaccounts"})}};
  if (!pod.empty()) {
    user["extra"] = {{"authentication.kubernetes.io/pod-name", json::array({pod})},
                     {"authentication.kubernetes.io/pod-uid", json::array({uid})}};
  }
  json status = {{"authenticated", true}, {"user", user}};
  if (!audiences.is_null()) status["audiences"] = audiences;
  return {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"status", status}};
}

TEST(IdentityFromTokenReview, APodBoundServiceAccountTokenNamesThePod) {
  auto id = identityFromTokenReview(
      reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1"), "kshard");
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_EQ(*id, (PodIdentity{"demo", "counter", "counter-0", "u-1"}));
}

TEST(IdentityFromTokenReview, AnythingElseIsUnauthenticatedWithTheReason) {
  struct Case {
    json review;
    std::string reason;
  };
  json refused = {{"status", {{"authenticated", false}, {"error", "token has expired"}}}};
  const std::vector<Case> cases = {
      {refused, "token has expired"},
      {json::object(), "no status"},
      {reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1",
                json::array({"https://kubernetes.default.svc"})),
       "audience \"kshard\""},
      {reviewOf("alice", "", ""), "belongs to alice"},
      {reviewOf("system:serviceaccount:demo", "counter-0", "u-1"), "malformed"},
      {reviewOf("system:serviceaccount::counter", "counter-0", "u-1"), "malformed"},
      {reviewOf("system:serviceaccount:demo:counter", "", ""), "not bound to a pod"},
  };
  for (const auto& c : cases) {
    auto id = identityFromTokenReview(c.review, "kshard");
    ASSERT_FALSE(id.ok()) << c.review.dump();
    EXPECT_EQ(id.status().code(), StatusCode::kUnauthenticated) << c.review.dump();
    EXPECT_NE(id.status().message().find(c.reason), std::string::npos)
        << id.status().message() << " lacks " << c.reason;
  }
}

TEST(IdentityFromTokenReview, AnApiServerWithoutAudiencesInItsAnswerIsAccepted) {
  auto id = identityFromTokenReview(
      reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1", json()), "kshard");
  EXPECT_TRUE(id.ok()) << id.status().toString();
}

class TokenReviewAuthenticatorTest : public ::testing::Test {
 protected:
  TokenReviewAuthenticatorTest() {
    transport_.setHandler([this](const http::Request& r) {
      auto body = json::parse(r.body);
      lastToken_ = body["spec"]["token"].get<std::string>();
      lastAudiences_ = body["spec"]["audiences"];
      if (lastToken_ == "good") {
        return std::optional<StatusOr<http::Response>>(kube::testing::jsonResponse(
            201, reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1").dump()));
      }
      if (lastToken_ == "down") {
        return std::optional<StatusOr<http::Response>>(unavailable("connection refused"));
      }
      return std::optional<StatusOr<http::Response>>(kube::testing::jsonResponse(
          201, json{{"status", {{"authenticated", false}, {"error", "invalid bearer token"}}}}
                   .dump()));
    });
  }

  StatusOr<PodIdentity> authenticate(const std::string& token) {
    std::optional<StatusOr<PodIdentity>> out;
    auth_.authenticate(token, [&](StatusOr<PodIdentity> r) { out = std::move(r); });
    EXPECT_TRUE(out.has_value()) << "no answer";
    return out.value_or(StatusOr<PodIdentity>(internalError("no answer")));
  }

  kube::testing::FakeTransport transport_;
  ManualClock clock_;
  ManualScheduler scheduler_;
  SeededRandom random_{1};
  Logger logger_{"t", LogLevel::kError, [](std::string_view) {}};
  kube::Client client_{transport_, scheduler_, random_, logger_,
                       kube::ClientOptions{.qps = 0, .maxRetries = 0}};
  TokenReviewAuthenticator auth_{client_, clock_, {.cacheTtl = 60s}};
  std::string lastToken_;
  json lastAudiences_;
};

TEST_F(TokenReviewAuthenticatorTest, ReviewsATokenOnceAndCachesTheIdentityForItsTtl) {
  auto id = authenticate("good");
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_EQ(id->pod, "counter-0");
  EXPECT_EQ(lastAudiences_, json::array({"kshard"}));
  ASSERT_EQ(transport_.requestCount(), 1u);
  EXPECT_EQ(transport_.requests()[0].target, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_TRUE(authenticate("good").ok());
  EXPECT_EQ(auth_.reviews(), 1u) << "the cached identity was not used";
  clock_.advance(61s);
  EXPECT_TRUE(authenticate("good").ok());
  EXPECT_EQ(auth_.reviews(), 2u) << "the identity outlived its TTL";
}

TEST_F(TokenReviewAuthenticatorTest, RefusedTokensAreNotCachedAndTheReasonIsKept) {
  for (int i = 0; i < 2; ++i) {
    auto id = authenticate("forged");
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(id.status().message().find("invalid bearer token"), std::string::npos);
  }
  EXPECT_EQ(auth_.reviews(), 2u);
  EXPECT_EQ(authenticate("").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.reviews(), 2u) << "an empty token needs no review";
}

TEST_F(TokenReviewAuthenticatorTest, AnApiServerThatCannotBeAskedIsUnavailableNotARefusal) {
  auto id = authenticate("down");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kUnavailable) << id.status().toString();
}

}  // namespace
}  // namespace kshard::manager
