// The manager API's caller authentication: reading a TokenReview's answer, the bearer header,
// and the TokenReview round trip with its cache, against a fake API server transport.
#include "operator/pod_authenticator.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/scheduler.h"
#include "kube/jwt_signer.h"
#include "tests/kube/fake_transport.h"

namespace kshard::manager {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json reviewOf(const std::string& username, const std::string& pod, const std::string& uid,
              json audiences = json::array({"kshard.io/operator"})) {
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
      reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1"), "kshard.io/operator");
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
       "audience \"kshard.io/operator\""},
      {reviewOf("alice", "", ""), "belongs to alice"},
      {reviewOf("system:serviceaccount:demo", "counter-0", "u-1"), "malformed"},
      {reviewOf("system:serviceaccount::counter", "counter-0", "u-1"), "malformed"},
      {reviewOf("system:serviceaccount:demo:counter", "", ""), "not bound to a pod"},
  };
  for (const auto& c : cases) {
    auto id = identityFromTokenReview(c.review, "kshard.io/operator");
    ASSERT_FALSE(id.ok()) << c.review.dump();
    EXPECT_EQ(id.status().code(), StatusCode::kUnauthenticated) << c.review.dump();
    EXPECT_NE(id.status().message().find(c.reason), std::string::npos)
        << id.status().message() << " lacks " << c.reason;
  }
}

TEST(IdentityFromTokenReview, AnApiServerWithoutAudiencesInItsAnswerIsAccepted) {
  auto id = identityFromTokenReview(
      reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1", json()), "kshard.io/operator");
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
      if (lastToken_ == "parked") return std::optional<StatusOr<http::Response>>();
      return std::optional<StatusOr<http::Response>>(kube::testing::jsonResponse(
          201,
          json{{"status", {{"authenticated", false}, {"error", "invalid bearer token"}}}}.dump()));
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
  TokenReviewAuthenticator auth_{client_, clock_, nullptr, {.cacheTtl = 60s, .refusalTtl = 10s}};
  std::string lastToken_;
  json lastAudiences_;
};

TEST_F(TokenReviewAuthenticatorTest, ReviewsATokenOnceAndCachesTheIdentityForItsTtl) {
  auto id = authenticate("good");
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_EQ(id->pod, "counter-0");
  EXPECT_EQ(lastAudiences_, json::array({"kshard.io/operator"}));
  ASSERT_EQ(transport_.requestCount(), 1u);
  EXPECT_EQ(transport_.requests()[0].target, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_TRUE(authenticate("good").ok());
  EXPECT_EQ(auth_.reviews(), 1u) << "the cached identity was not used";
  clock_.advance(61s);
  EXPECT_TRUE(authenticate("good").ok());
  EXPECT_EQ(auth_.reviews(), 2u) << "the identity outlived its TTL";
}

// A deleted pod's token still verifies as a JWT until it expires: only the API server can refuse
// it, and it is not asked again for every call.
TEST_F(TokenReviewAuthenticatorTest, RefusalsAreCachedForTheirTtlWithTheReason) {
  for (int i = 0; i < 100; ++i) {
    auto id = authenticate("forged");
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(id.status().message().find("invalid bearer token"), std::string::npos);
  }
  EXPECT_EQ(auth_.reviews(), 1u);
  clock_.advance(11s);
  EXPECT_FALSE(authenticate("forged").ok());
  EXPECT_EQ(auth_.reviews(), 2u) << "the refusal outlived its TTL";
  EXPECT_EQ(authenticate("").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.reviews(), 2u) << "an empty token needs no review";
}

TEST_F(TokenReviewAuthenticatorTest, CallersWithATokenUnderReviewWaitForThatOneReview) {
  std::vector<StatusOr<PodIdentity>> answers;
  for (int i = 0; i < 50; ++i) {
    auth_.authenticate("parked", [&](StatusOr<PodIdentity> r) { answers.push_back(std::move(r)); });
  }
  ASSERT_TRUE(transport_.waitForParked(1));
  EXPECT_EQ(auth_.reviews(), 1u);
  EXPECT_TRUE(answers.empty());
  transport_.answer(kube::testing::jsonResponse(
      201, reviewOf("system:serviceaccount:demo:counter", "counter-0", "u-1").dump()));
  ASSERT_EQ(answers.size(), 50u);
  for (const auto& a : answers) EXPECT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(transport_.requestCount(), 1u);
}

TEST_F(TokenReviewAuthenticatorTest, AnApiServerThatCannotBeAskedIsUnavailableNotARefusal) {
  auto id = authenticate("down");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kUnavailable) << id.status().toString();
}

// With the issuer's keys, a token is verified before any TokenReview: what does not verify
// costs none, however many come.
class LocallyVerifiedAuthenticatorTest : public TokenReviewAuthenticatorTest {
 protected:
  LocallyVerifiedAuthenticatorTest() {
    keys_.set(kIssuer, std::move(*kube::JwkSet::parse(signer_.jwks())));
  }
  std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch())
        .count();
  }
  std::string token(const kube::JwtSigner& signer, std::string audience = "kshard.io/operator",
                    std::string pod = "counter-0", std::int64_t ttl = 3600) const {
    return signer.sign(kube::serviceAccountClaims(kIssuer, audience, "demo", "counter", pod,
                                                  pod.empty() ? "" : "u-1", now(), now() + ttl));
  }

  static inline const std::string kIssuer = "https://kubernetes.default.svc.cluster.local";
  kube::JwtSigner signer_ = kube::JwtSigner::generate("ES256", "k1");
  kube::JwtSigner stranger_ = kube::JwtSigner::generate("ES256", "k2");
  kube::FixedIssuerKeys keys_;
  kube::TokenVerifier verifier_{keys_, clock_, {.audience = "kshard.io/operator"}};
  TokenReviewAuthenticator local_{client_, clock_, &verifier_};
};

TEST_F(LocallyVerifiedAuthenticatorTest, AFloodOfTokensThatDoNotVerifyMakesNoTokenReview) {
  const std::vector<std::pair<std::string, std::string>> bogus = {
      {"not-a-jwt", "not a JWT"},
      {token(stranger_), "unknown key"},
      {token(signer_, "https://kubernetes.default.svc"), "audience"},
      {token(signer_, "kshard.io/operator", "counter-0", -3600), "expired"},
      {token(signer_, "kshard.io/operator", ""), "not bound to a pod"},
  };
  for (int round = 0; round < 200; ++round) {
    for (const auto& [t, reason] : bogus) {
      std::optional<StatusOr<PodIdentity>> out;
      local_.authenticate(t, [&](StatusOr<PodIdentity> r) { out = std::move(r); });
      ASSERT_TRUE(out.has_value()) << "answered at once";
      ASSERT_EQ(out->status().code(), StatusCode::kUnauthenticated) << reason;
      EXPECT_NE(out->status().message().find(reason), std::string::npos)
          << out->status().message() << " lacks " << reason;
    }
  }
  EXPECT_EQ(local_.reviews(), 0u);
  EXPECT_EQ(transport_.requestCount(), 0u) << "a token that does not verify reached the API";
  EXPECT_GE(keys_.refreshRequests(), 1) << "an unknown key asks for the keys again";
}

TEST_F(LocallyVerifiedAuthenticatorTest, ATokenThatVerifiesIsStillReviewedByTheApiServer) {
  std::optional<StatusOr<PodIdentity>> out;
  const std::string t = token(signer_);
  local_.authenticate(t, [&](StatusOr<PodIdentity> r) { out = std::move(r); });
  ASSERT_TRUE(out.has_value());
  // The fake API server knows only "good": a valid JWT of a deleted pod is refused there.
  EXPECT_EQ(out->status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(local_.reviews(), 1u);
  EXPECT_EQ(lastToken_, t);
}

TEST_F(LocallyVerifiedAuthenticatorTest, KeysNotLoadedYetAreUnavailableNotARefusal) {
  kube::FixedIssuerKeys none;
  kube::TokenVerifier verifier(none, clock_, {.audience = "kshard.io/operator"});
  TokenReviewAuthenticator auth(client_, clock_, &verifier);
  std::optional<StatusOr<PodIdentity>> out;
  auth.authenticate(token(signer_), [&](StatusOr<PodIdentity> r) { out = std::move(r); });
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), StatusCode::kUnavailable) << out->status().toString();
  EXPECT_EQ(transport_.requestCount(), 0u);
}

}  // namespace
}  // namespace kshard::manager
