// sidecar/token_authorizer.h: who may call the peer API, proven by projected tokens verified
// against the issuer keys; the verified-token cache; and loading the keys from the API server.
#include "sidecar/token_authorizer.h"

#include <gtest/gtest.h>

#include "kube/jwt_signer.h"
#include "tests/kube/fake_transport.h"
#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kIssuer = "https://kubernetes.default.svc.cluster.local";
const std::string kOperator = "system:serviceaccount:kshard-system:kshard";
// What the callers of demo/counter's sidecars need (protocol/audiences.h).
const std::string kOperatorAudience = "kshard.io/sidecar/demo/counter";
const std::string kPeerAudience = "kshard.io/peer/demo/counter";

void setKeys(FixedIssuerKeys& keys, const kube::JwtSigner& signer) {
  keys.set(kIssuer, std::move(*kube::JwkSet::parse(signer.jwks())));
}

http::Request withToken(const std::string& token) {
  http::Request r;
  r.headers.set("Authorization", "Bearer " + token);
  return r;
}

class TokenAuthorizerTest : public ::testing::Test {
 protected:
  TokenAuthorizerTest() {
    setKeys(keys_, signer_);
    // counter-0 and counter-1 are registered pods of demo/counter.
    table_.update(testing::makeMap(10, 3, {{"counter-0", "1-5"}, {"counter-1", "6-10"}}));
  }

  std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch())
        .count();
  }
  std::string podToken(const std::string& pod, const std::string& uid,
                       const std::string& ns = "demo", std::int64_t ttl = 3600,
                       const json& audience = kPeerAudience) const {
    json claims =
        kube::serviceAccountClaims(kIssuer, "", ns, "counter", pod, uid, now(), now() + ttl);
    claims["aud"] = audience;
    return signer_.sign(claims);
  }
  // As the operator mints it with TokenRequest: not bound to a pod.
  std::string operatorToken(std::int64_t ttl = 3600,
                            const json& audience = kOperatorAudience) const {
    json claims = kube::serviceAccountClaims(kIssuer, "", "kshard-system", "kshard", "", "", now(),
                                             now() + ttl);
    claims["kubernetes.io"].erase("pod");
    claims["aud"] = audience;
    return signer_.sign(claims);
  }

  kube::JwtSigner signer_ = kube::JwtSigner::generate("ES256", "k1");
  FixedIssuerKeys keys_;
  ManualClock clock_;
  RoutingTable table_{clock_};
  TokenAuthorizer auth_{keys_, table_, clock_,
                        {.operatorSubject = kOperator, .ns = "demo", .shardMap = "demo/counter"}};
};

TEST_F(TokenAuthorizerTest, OnlyTheOperatorMayPingAssignAndUnassign) {
  EXPECT_TRUE(auth_.authorizeOperator(withToken(operatorToken())).ok());
  // A pod's token for the operator's audience of this map (any tenant may mint its own).
  const Status pod = auth_.authorizeOperator(
      withToken(podToken("counter-0", "counter-0-uid", "demo", 3600, kOperatorAudience)));
  EXPECT_EQ(pod.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(pod.message().find("system:serviceaccount:demo:counter"), std::string::npos)
      << pod.message();
  EXPECT_EQ(auth_.authorizeOperator(http::Request{}).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.authorizeOperator(withToken("not-a-jwt")).code(), StatusCode::kUnauthenticated);
  // Signed by a key the cluster does not have, under the same kid.
  const auto forger = kube::JwtSigner::generate("ES256", "k1");
  const std::string forged = forger.sign(kube::serviceAccountClaims(
      kIssuer, kOperatorAudience, "kshard-system", "kshard", "x", "y", now(), now() + 60));
  EXPECT_EQ(auth_.authorizeOperator(withToken(forged)).code(), StatusCode::kUnauthenticated);
}

// Issue 29: the operator's one token opened every sidecar, and every pod it pinged received it.
TEST_F(TokenAuthorizerTest, TheOperatorsTokenForAnotherShardMapOpensNothingHere) {
  for (const char* other : {"kshard.io/sidecar/demo/other", "kshard.io/sidecar/other/counter",
                            "kshard", "kshard.io/operator", "kshard.io/peer/demo/counter"}) {
    const Status s = auth_.authorizeOperator(withToken(operatorToken(3600, other)));
    EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << other;
  }
  // One that another map's sidecars would take too.
  const Status both = auth_.authorizeOperator(withToken(
      operatorToken(3600, json::array({kOperatorAudience, "kshard.io/sidecar/demo/other"}))));
  EXPECT_EQ(both.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(both.message().find("only"), std::string::npos) << both.message();
}

// A pod's token for the manager API, which a peer receives in no message, and a peer's token,
// which the operator would take from nobody, are each good for their own direction only.
TEST_F(TokenAuthorizerTest, EachDirectionNeedsItsOwnAudienceEvenFromTheCache) {
  const std::string peer = podToken("counter-1", "counter-1-uid");
  ASSERT_TRUE(auth_.authorizePeer(withToken(peer)).ok());
  ASSERT_EQ(auth_.cachedTokens(), 1u);
  EXPECT_EQ(auth_.authorizeOperator(withToken(peer)).code(), StatusCode::kUnauthenticated)
      << "a cached peer token was taken for an operator call";
  const std::string manager =
      podToken("counter-1", "counter-1-uid", "demo", 3600, "kshard.io/operator");
  EXPECT_EQ(auth_.authorizePeer(withToken(manager)).code(), StatusCode::kUnauthenticated);
  const std::string otherMap =
      podToken("counter-1", "counter-1-uid", "demo", 3600, "kshard.io/peer/demo/other");
  EXPECT_EQ(auth_.authorizePeer(withToken(otherMap)).code(), StatusCode::kUnauthenticated);
}

// The operator's signature on its answers to reads of the map's changes, which registered pods
// of the map receive, opens no command; its command token signs no answer.
TEST_F(TokenAuthorizerTest, AnswersAndCommandsEachNeedTheirOwnAudience) {
  const std::string answer = operatorToken(3600, "kshard.io/map-answer/demo/counter");
  EXPECT_TRUE(auth_.authorizeManagerAnswer(withToken(answer)).ok());
  EXPECT_EQ(auth_.authorizeOperator(withToken(answer)).code(), StatusCode::kUnauthenticated)
      << "an answer's signature was taken for an assign";
  EXPECT_EQ(auth_.authorizeManagerAnswer(withToken(operatorToken())).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.authorizeManagerAnswer(
                    withToken(operatorToken(3600, "kshard.io/map-answer/demo/other")))
                .code(),
            StatusCode::kUnauthenticated);
  // A pod's own token for that audience (any tenant may mint one) is not the operator's.
  EXPECT_EQ(auth_.authorizeManagerAnswer(withToken(podToken("counter-0", "counter-0-uid", "demo",
                                                            3600,
                                                            "kshard.io/map-answer/demo/counter")))
                .code(),
            StatusCode::kPermissionDenied);
}

TEST_F(TokenAuthorizerTest, OnlyRegisteredPodsOfTheSameShardMapMayForward) {
  EXPECT_TRUE(auth_.authorizePeer(withToken(podToken("counter-1", "counter-1-uid"))).ok());
  // Same name, another incarnation.
  EXPECT_EQ(auth_.authorizePeer(withToken(podToken("counter-1", "old-uid"))).code(),
            StatusCode::kPermissionDenied);
  // Another namespace.
  EXPECT_EQ(auth_.authorizePeer(withToken(podToken("counter-1", "counter-1-uid", "other"))).code(),
            StatusCode::kPermissionDenied);
  // The operator's token is not bound to a registered pod of this map.
  EXPECT_EQ(auth_.authorizePeer(withToken(operatorToken(3600, kPeerAudience))).code(),
            StatusCode::kPermissionDenied);
  // Not (yet) in this sidecar's copy of the status: the sender is told to retry, though its
  // credential is admitted (PeerApi::admit reads its body, the route answers).
  const Status unknown = auth_.authorizePeer(withToken(podToken("counter-2", "counter-2-uid")));
  EXPECT_EQ(unknown.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(auth_.admitPeer(withToken(podToken("counter-2", "counter-2-uid"))).ok());
  EXPECT_EQ(auth_.admitPeer(withToken(podToken("counter-2", "counter-2-uid", "other"))).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(auth_.admitPeer(withToken(operatorToken(3600, kOperatorAudience))).code(),
            StatusCode::kUnauthenticated);
  table_.update(testing::makeMap(10, 4, {{"counter-0", "1-5"}, {"counter-1", "6-10"},
                                         {"counter-2", ""}}));
  EXPECT_TRUE(auth_.authorizePeer(withToken(podToken("counter-2", "counter-2-uid"))).ok());
  // A token without a pod binding.
  json unbound = kube::serviceAccountClaims(kIssuer, kPeerAudience, "demo", "counter", "", "",
                                            now(), now() + 60);
  unbound["kubernetes.io"].erase("pod");
  EXPECT_EQ(auth_.authorizePeer(withToken(signer_.sign(unbound))).code(),
            StatusCode::kPermissionDenied);
}

// Found end to end: a pod scaled away drained, unregistered, then forwarded a request its app had
// in flight, and every owner refused it as "not a registered pod" until the send timed out.
TEST_F(TokenAuthorizerTest, APodThatJustLeftMayStillForwardForTwiceTheSendTimeout) {
  const std::string leaving = podToken("counter-1", "counter-1-uid");
  table_.update(testing::makeMap(10, 4, {{"counter-0", "1-10"}}));  // counter-1 unregistered
  ASSERT_EQ(table_.snapshot()->spec.sendTimeout, 10s);
  EXPECT_TRUE(auth_.authorizePeer(withToken(leaving)).ok());
  // Another incarnation under the same name did not leave: it was never here.
  EXPECT_EQ(auth_.authorizePeer(withToken(podToken("counter-1", "other-uid"))).code(),
            StatusCode::kUnavailable);
  clock_.advance(20s);
  EXPECT_TRUE(auth_.authorizePeer(withToken(leaving)).ok());
  table_.update(testing::makeMap(10, 5, {{"counter-0", "1-10"}}));  // kept across updates
  clock_.advance(1s);
  EXPECT_EQ(auth_.authorizePeer(withToken(leaving)).code(), StatusCode::kUnavailable)
      << "a pod that left 21 s ago still forwards";
}

TEST_F(TokenAuthorizerTest, VerifiedTokensAreCachedUntilTheyExpire) {
  const std::string token = podToken("counter-0", "counter-0-uid", "demo", /*ttl=*/120);
  EXPECT_TRUE(auth_.authorizePeer(withToken(token)).ok());
  EXPECT_EQ(auth_.cachedTokens(), 1u);
  EXPECT_TRUE(auth_.authorizePeer(withToken(token)).ok());
  EXPECT_EQ(auth_.cachedTokens(), 1u);
  // Refused tokens are not cached.
  EXPECT_FALSE(auth_.authorizePeer(withToken("a.b.c")).ok());
  EXPECT_EQ(auth_.cachedTokens(), 1u);
  clock_.advance(121s);  // within the verifier's leeway: verified again, not cached
  EXPECT_TRUE(auth_.authorizePeer(withToken(token)).ok());
  EXPECT_EQ(auth_.cachedTokens(), 0u);
  clock_.advance(60s);  // past the leeway
  EXPECT_EQ(auth_.authorizePeer(withToken(token)).code(), StatusCode::kUnauthenticated);
}

TEST_F(TokenAuthorizerTest, RotatedKeysDropTheCacheAndAnUnknownKeyAsksForARefresh) {
  const std::string token = podToken("counter-0", "counter-0-uid");
  EXPECT_TRUE(auth_.authorizePeer(withToken(token)).ok());
  const auto rotated = kube::JwtSigner::generate("RS256", "k2");
  setKeys(keys_, rotated);  // k1 removed from the set
  const Status old = auth_.authorizePeer(withToken(token));
  EXPECT_EQ(old.code(), StatusCode::kUnauthenticated) << "a cached token outlived its key";
  EXPECT_EQ(keys_.refreshRequests(), 1);
  EXPECT_EQ(auth_.cachedTokens(), 0u);
  const std::string fresh = rotated.sign(kube::serviceAccountClaims(
      kIssuer, kPeerAudience, "demo", "counter", "counter-0", "counter-0-uid", now(), now() + 60));
  EXPECT_TRUE(auth_.authorizePeer(withToken(fresh)).ok());
}

TEST(TokenAuthorizer, WithoutKeysEveryCallerIsToldToRetry) {
  FixedIssuerKeys none;
  RoutingTable table;
  ManualClock clock;
  TokenAuthorizer auth(none, table, clock,
                       {.operatorSubject = kOperator, .ns = "demo", .shardMap = "demo/counter"});
  EXPECT_EQ(auth.authorizeOperator(withToken("x.y.z")).code(), StatusCode::kUnavailable);
  EXPECT_EQ(auth.authorizeOperator(http::Request{}).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.admitPeer(withToken("x.y.z")).code(), StatusCode::kUnavailable)
      << "a token that cannot be verified is not admitted";
}

class ApiServerIssuerKeysTest : public ::testing::Test {
 protected:
  ApiServerIssuerKeysTest() {
    transport_.setHandler([this](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
      if (down_) return StatusOr<http::Response>(unavailable("connection refused"));
      if (r.target == "/.well-known/openid-configuration") {
        return kube::testing::jsonResponse(
            200, json{{"issuer", kIssuer}, {"jwks_uri", kIssuer + "/openid/v1/jwks"}}.dump());
      }
      if (r.target == "/openid/v1/jwks") {
        // As the API server: only its own media type.
        if (r.headers.get("Accept") != "application/jwk-set+json") {
          return kube::testing::jsonResponse(406, "406: Not Acceptable");
        }
        return kube::testing::jsonResponse(200, jwks_);
      }
      return kube::testing::jsonResponse(404, "{}");
    });
  }

  kube::testing::FakeTransport transport_;
  ManualScheduler scheduler_;
  SeededRandom random_{1};
  Logger logger_{"t", LogLevel::kError, [](std::string_view) {}};
  kube::Client client_{transport_, scheduler_, random_, logger_,
                       kube::ClientOptions{.qps = 0, .maxRetries = 0}};
  bool down_ = false;
  std::string jwks_ = kube::JwtSigner::generate("ES256", "k1").jwks();
};

TEST_F(ApiServerIssuerKeysTest, LoadsTheIssuerAndKeysAndRefreshesOnRotation) {
  ApiServerIssuerKeys keys(client_, scheduler_, logger_,
                           {.refreshEvery = 300s,
                            .minRefreshGap = 10s,
                            .retryAfterFailure = 2s,
                            .maxRetryDelay = 30s});
  keys.start();
  ASSERT_TRUE(keys.waitLoaded(5s));
  auto first = keys.current();
  EXPECT_EQ(first->issuer, kIssuer);
  EXPECT_EQ(first->keys.keyIds(), std::vector<std::string>{"k1"});
  const std::size_t requests = transport_.requestCount();

  // A token names an unknown key: at most one fetch per minRefreshGap.
  jwks_ = kube::JwtSigner::generate("RS256", "k2").jwks();
  keys.refreshSoon();
  keys.refreshSoon();
  scheduler_.advance(9s);
  EXPECT_EQ(transport_.requestCount(), requests) << "refreshed before the minimum gap";
  scheduler_.advance(1s);
  EXPECT_EQ(transport_.requestCount(), requests + 2);
  auto second = keys.current();
  EXPECT_EQ(second->keys.keyIds(), std::vector<std::string>{"k2"});
  EXPECT_GT(second->generation, first->generation);

  // Unchanged keys keep their generation (the authorizer's cache stays).
  scheduler_.advance(300s);
  EXPECT_EQ(keys.current()->generation, second->generation);
  keys.stop();
}

// Issue 29: a token naming an unknown key, sent to every sidecar, made each fetch the keys every
// 10 s for as long as it lasted. Refreshes that find nothing new now back off to the periodic rate.
TEST_F(ApiServerIssuerKeysTest, UnknownKeyRefreshesBackOffWhileTheyFindNothingNew) {
  ApiServerIssuerKeys keys(
      client_, scheduler_, logger_,
      {.refreshEvery = 300s, .minRefreshGap = 10s, .retryAfterFailure = 2s, .maxRetryDelay = 30s});
  keys.start();
  ASSERT_TRUE(keys.waitLoaded(5s));
  std::vector<int> gaps;  // seconds between the fetches a flood of unknown keys causes
  int since = 0;
  std::size_t requests = transport_.requestCount();
  for (int second = 1; second <= 1000 && gaps.size() < 7; ++second) {
    keys.refreshSoon();  // every second, a token with an unknown key
    scheduler_.advance(1s);
    ++since;
    if (transport_.requestCount() != requests) {
      requests = transport_.requestCount();
      gaps.push_back(since);
      since = 0;
    }
  }
  EXPECT_EQ(gaps, (std::vector<int>{10, 20, 40, 80, 160, 300, 300}));
  // A real rotation resets the gap.
  jwks_ = kube::JwtSigner::generate("RS256", "k2").jwks();
  scheduler_.advance(300s);  // the periodic refresh finds it
  ASSERT_EQ(keys.current()->keys.keyIds(), std::vector<std::string>{"k2"});
  requests = transport_.requestCount();
  keys.refreshSoon();
  scheduler_.advance(10s);
  EXPECT_EQ(transport_.requestCount(), requests + 2) << "the gap did not start over";
  keys.stop();
}

TEST_F(ApiServerIssuerKeysTest, AFailedFetchKeepsTheLastKeysAndRetries) {
  ApiServerIssuerKeys keys(client_, scheduler_, logger_,
                           {.refreshEvery = 300s,
                            .minRefreshGap = 10s,
                            .retryAfterFailure = 2s,
                            .maxRetryDelay = 30s});
  down_ = true;
  keys.start();
  EXPECT_EQ(keys.current(), nullptr);
  down_ = false;
  scheduler_.advance(2s);
  ASSERT_NE(keys.current(), nullptr) << "the failed first fetch was not retried";
  const auto loaded = keys.current();
  down_ = true;
  scheduler_.advance(300s);
  EXPECT_EQ(keys.current(), loaded) << "a failed refresh dropped the keys";
  keys.stop();
}

}  // namespace
}  // namespace kshard::sidecar
