// kube/jwt.h: what a service-account token must be to be accepted, for each key type the API
// server signs with, and every way a token can be wrong.
#include "kube/jwt.h"

#include <gtest/gtest.h>

#include "base/base64.h"
#include "kube/jwt_signer.h"

namespace kshard::kube {
namespace {

using nlohmann::json;

constexpr std::int64_t kNow = 1'800'000'000;
const std::string kIssuer = "https://kubernetes.default.svc.cluster.local";

json claims(std::int64_t exp = kNow + 3600) {
  return serviceAccountClaims(kIssuer, "kshard", "demo", "counter", "counter-0", "uid-0",
                              kNow - 60, exp);
}

JwtExpectations expectations() { return {.issuer = kIssuer, .audience = "kshard", .now = kNow}; }

JwkSet keysOf(const JwtSigner& signer) {
  auto set = JwkSet::parse(signer.jwks());
  EXPECT_TRUE(set.ok()) << set.status().toString();
  return std::move(*set);
}

class EveryAlgorithm : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryAlgorithm, AcceptsAValidTokenAndReadsItsClaims) {
  const auto signer = JwtSigner::generate(GetParam(), "k1");
  const auto keys = keysOf(signer);
  auto got = verifyJwt(signer.sign(claims()), keys, expectations());
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->issuer, kIssuer);
  EXPECT_EQ(got->subject, "system:serviceaccount:demo:counter");
  EXPECT_EQ(got->audiences, std::vector<std::string>{"kshard"});
  EXPECT_EQ(got->expiresAt, kNow + 3600);
  EXPECT_EQ(got->keyId, "k1");
  EXPECT_EQ(got->namespace_, "demo");
  EXPECT_EQ(got->serviceAccount, "counter");
  EXPECT_EQ(got->podName, "counter-0");
  EXPECT_EQ(got->podUid, "uid-0");
}

TEST_P(EveryAlgorithm, RefusesAChangedClaimOrSignature) {
  const auto signer = JwtSigner::generate(GetParam(), "k1");
  const auto keys = keysOf(signer);
  const std::string token = signer.sign(claims());
  const auto dot1 = token.find('.');
  const auto dot2 = token.rfind('.');
  json other = claims();
  other["sub"] = "system:serviceaccount:kshard-system:kshard";
  const std::string forged =
      token.substr(0, dot1 + 1) + base64UrlEncode(other.dump()) + token.substr(dot2);
  auto got = verifyJwt(forged, keys, expectations());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(got.status().message().find("signature does not verify"), std::string::npos)
      << got.status().message();

  std::string sig = *base64UrlDecode(token.substr(dot2 + 1));
  sig[sig.size() / 2] ^= 0x01;
  auto flipped = verifyJwt(token.substr(0, dot2 + 1) + base64UrlEncode(sig), keys, expectations());
  EXPECT_EQ(flipped.status().code(), StatusCode::kUnauthenticated);
}

INSTANTIATE_TEST_SUITE_P(Jwt, EveryAlgorithm, ::testing::Values("RS256", "ES256", "ES384"));

TEST(Jwt, RefusesAlgNoneAndHmac) {
  const auto signer = JwtSigner::generate("RS256", "k1");
  const auto keys = keysOf(signer);
  const std::string body = base64UrlEncode(claims().dump());
  const std::string none = base64UrlEncode(R"({"alg":"none","kid":"k1"})") + "." + body + ".";
  auto got = verifyJwt(none, keys, expectations());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(got.status().message().find("\"none\" is not accepted"), std::string::npos);
  // HS256 with the public key's bytes as the secret: the classic confusion attack.
  auto hs = verifyJwt(signer.signParts(base64UrlEncode(R"({"alg":"HS256","kid":"k1"})"), body),
                      keys, expectations());
  EXPECT_EQ(hs.status().code(), StatusCode::kUnauthenticated);
}

TEST(Jwt, RefusesAnAlgorithmThatDoesNotMatchTheKey) {
  const auto rsa = JwtSigner::generate("RS256", "shared-kid");
  const auto ec = JwtSigner::generate("ES256", "shared-kid");
  const auto keys = keysOf(rsa);
  // An ES256 token naming the RSA key's kid.
  auto got = verifyJwt(ec.sign(claims()), keys, expectations());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(got.status().message().find("does not match its key"), std::string::npos);
  // ES384 against a P-256 key.
  const auto p256 = JwtSigner::generate("ES256", "k");
  const auto p384 = JwtSigner::generate("ES384", "k");
  EXPECT_FALSE(verifyJwt(p384.sign(claims()), keysOf(p256), expectations()).ok());
}

TEST(Jwt, AnUnknownKeyIdIsNotFoundSoTheCallerCanRefreshTheKeys) {
  const auto old = JwtSigner::generate("ES256", "old");
  const auto rotated = JwtSigner::generate("ES256", "new");
  auto got = verifyJwt(rotated.sign(claims()), keysOf(old), expectations());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("\"new\""), std::string::npos);
}

TEST(Jwt, ATokenWithoutKidIsCheckedAgainstEveryKeyOfItsType) {
  const auto signer = JwtSigner::generate("ES256", "k1");
  json jwk = signer.publicJwk();
  jwk.erase("kid");
  auto keys = JwkSet::parse(json{{"keys", {jwk}}}.dump());
  ASSERT_TRUE(keys.ok());
  const std::string body = base64UrlEncode(claims().dump());
  auto got =
      verifyJwt(signer.signParts(base64UrlEncode(R"({"alg":"ES256"})"), body), *keys,
                expectations());
  EXPECT_TRUE(got.ok()) << got.status().toString();
}

TEST(Jwt, ChecksExpiryAndNotBeforeWithLeeway) {
  const auto signer = JwtSigner::generate("ES256", "k1");
  const auto keys = keysOf(signer);
  EXPECT_TRUE(verifyJwt(signer.sign(claims(kNow - 30)), keys, expectations()).ok());
  auto expired = verifyJwt(signer.sign(claims(kNow - 61)), keys, expectations());
  EXPECT_EQ(expired.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos);

  json early = claims();
  early["nbf"] = kNow + 120;
  auto notYet = verifyJwt(signer.sign(early), keys, expectations());
  EXPECT_NE(notYet.status().message().find("not valid before"), std::string::npos);

  json noExp = claims();
  noExp.erase("exp");
  auto forever = verifyJwt(signer.sign(noExp), keys, expectations());
  EXPECT_NE(forever.status().message().find("no expiry"), std::string::npos);
}

TEST(Jwt, ChecksAudienceAndIssuer) {
  const auto signer = JwtSigner::generate("ES256", "k1");
  const auto keys = keysOf(signer);
  json apiServer = claims();
  apiServer["aud"] = json::array({"https://kubernetes.default.svc.cluster.local"});
  auto wrongAud = verifyJwt(signer.sign(apiServer), keys, expectations());
  EXPECT_NE(wrongAud.status().message().find("not for audience kshard"), std::string::npos);

  json single = claims();
  single["aud"] = "kshard";  // a plain string is allowed
  EXPECT_TRUE(verifyJwt(signer.sign(single), keys, expectations()).ok());

  json other = claims();
  other["iss"] = "https://elsewhere.example";
  auto wrongIss = verifyJwt(signer.sign(other), keys, expectations());
  EXPECT_NE(wrongIss.status().message().find("issuer"), std::string::npos);
}

TEST(Jwt, RefusesMalformedTokens) {
  const auto signer = JwtSigner::generate("ES256", "k1");
  const auto keys = keysOf(signer);
  const std::string good = signer.sign(claims());
  for (const std::string& bad :
       {std::string(), std::string("abc"), std::string("a.b"), good + ".x", std::string("!!.??.##"),
        base64UrlEncode("[1,2]") + "." + base64UrlEncode("{}") + ".", std::string(20000, 'a')}) {
    auto got = verifyJwt(bad, keys, expectations());
    EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated) << bad.substr(0, 40);
  }
  json crit = json{{"crit", json::array({"exp"})}};
  EXPECT_FALSE(verifyJwt(signer.sign(claims(), crit), keys, expectations()).ok());
}

TEST(JwkSet, SkipsKeysItCannotUseAndRefusesASetWithoutAny) {
  const auto signer = JwtSigner::generate("ES256", "good");
  json offCurve = signer.publicJwk();
  offCurve["kid"] = "off-curve";
  offCurve["y"] = offCurve["x"];
  json set = {{"keys",
               {signer.publicJwk(),
                {{"kty", "oct"}, {"k", "c2VjcmV0"}, {"kid", "hmac"}},
                {{"kty", "RSA"}, {"use", "enc"}, {"n", "AQAB"}, {"e", "AQAB"}},
                {{"kty", "RSA"}, {"n", "AQAB"}, {"e", "AQAB"}, {"kid", "tiny"}},
                offCurve,
                "not an object"}}};
  auto keys = JwkSet::parse(set.dump());
  ASSERT_TRUE(keys.ok()) << keys.status().toString();
  EXPECT_EQ(keys->keyIds(), std::vector<std::string>{"good"});
  EXPECT_EQ(keys->skipped(), 5u);

  EXPECT_FALSE(JwkSet::parse(R"({"keys":[]})").ok());
  EXPECT_FALSE(JwkSet::parse("[]").ok());
  EXPECT_FALSE(JwkSet::parse("not json").ok());
}

TEST(BearerToken, ReadsTheSchemeCaseInsensitivelyAndTrims) {
  EXPECT_EQ(bearerToken("Bearer abc.def"), "abc.def");
  EXPECT_EQ(bearerToken("bearer  abc "), "abc");
  EXPECT_EQ(bearerToken("Basic abc"), "");
  EXPECT_EQ(bearerToken("Bearer "), "");
  EXPECT_EQ(bearerToken(""), "");
}

}  // namespace
}  // namespace kshard::kube
