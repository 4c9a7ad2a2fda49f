// kube/token_verifier.h: tokens verified against the issuer's keys for one audience, the cache of
// verified tokens, and what happens when the keys are missing, rotate or lack the token's key.
#include "kube/token_verifier.h"

#include <gtest/gtest.h>

#include "kube/jwt_signer.h"

namespace kshard::kube {
namespace {

const std::string kIssuer = "https://kubernetes.default.svc.cluster.local";

class TokenVerifierTest : public ::testing::Test {
 protected:
  TokenVerifierTest() { keys_.set(kIssuer, std::move(*JwkSet::parse(signer_.jwks()))); }

  std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch())
        .count();
  }
  std::string token(const JwtSigner& signer, std::int64_t ttl = 3600) const {
    return signer.sign(
        serviceAccountClaims(kIssuer, "kshard", "demo", "counter", "p", "u", now(), now() + ttl));
  }

  JwtSigner signer_ = JwtSigner::generate("ES256", "k1");
  FixedIssuerKeys keys_;
  ManualClock clock_;
  TokenVerifier verifier_{keys_, clock_, {.audience = "kshard"}};
};

TEST_F(TokenVerifierTest, AValidTokenIsVerifiedOnceThenServedFromTheCacheUntilItExpires) {
  const std::string t = token(signer_, 120);
  auto claims = verifier_.verify(t);
  ASSERT_TRUE(claims.ok()) << claims.status().toString();
  EXPECT_EQ(claims->podName, "p");
  EXPECT_EQ(verifier_.cachedTokens(), 1u);
  EXPECT_TRUE(verifier_.verify(t).ok());
  clock_.advance(std::chrono::seconds(121));
  // Past its expiry the entry goes; within the leeway the token still verifies afresh.
  EXPECT_TRUE(verifier_.verify(t).ok());
  EXPECT_EQ(verifier_.cachedTokens(), 0u);
}

TEST_F(TokenVerifierTest, NewKeysDropTheCacheAndAnUnknownKeyAsksForThemAgain) {
  ASSERT_TRUE(verifier_.verify(token(signer_)).ok());
  const JwtSigner rotated = JwtSigner::generate("ES256", "k2");
  auto unknown = verifier_.verify(token(rotated));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(unknown.status().message().find("unknown key"), std::string::npos);
  EXPECT_EQ(keys_.refreshRequests(), 1);
  keys_.set(kIssuer, std::move(*JwkSet::parse(rotated.jwks())));
  EXPECT_TRUE(verifier_.verify(token(rotated)).ok());
  EXPECT_EQ(verifier_.cachedTokens(), 1u) << "the old key's tokens were dropped";
  EXPECT_FALSE(verifier_.verify(token(signer_)).ok()) << "a removed key still worked";
}

TEST_F(TokenVerifierTest, WithoutKeysNothingCanBeConcluded) {
  FixedIssuerKeys none;
  TokenVerifier verifier(none, clock_, {.audience = "kshard"});
  auto r = verifier.verify(token(signer_));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().toString();
}

}  // namespace
}  // namespace kshard::kube
