// The manager API's routing and answers (leader check, ShardMap lookup, body validation,
// metrics), with a ShardManager over the fakes, called without a socket.
#include "operator/manager_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/jwt_signer.h"
#include "operator/pod_authenticator.h"
#include "operator/shard_manager.h"
#include "sharding/json_delta.h"
#include "sharding/shard_map_json.h"
#include "tests/kube/fake_transport.h"
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
        api_(manager_, leadership_, h_.metrics, h_.scheduler.clock(), quiet()) {
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

  http::Response call(std::string_view verb, std::string ns, std::string name, std::string body,
                      std::string authorization = {}) {
    return callOn(api_, verb, std::move(ns), std::move(name), std::move(body),
                  std::move(authorization));
  }
  http::Response callOn(ManagerApi& api, std::string_view verb, std::string ns, std::string name,
                        std::string body, std::string authorization = {}) {
    http::Request req;
    if (!authorization.empty()) req.headers.set("Authorization", std::move(authorization));
    req.method = verb == "assignments" ? http::Method::kGet : http::Method::kPost;
    req.params = {{"namespace", std::move(ns)}, {"name", std::move(name)}};
    req.body = std::move(body);
    auto out = std::make_shared<std::optional<http::Response>>();
    api.handle(verb, std::move(req),
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
      protocol::encode(protocol::RegisterRequest{a.name, a.uid, a.address, "1", "inc"});
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

// A read of the changes since a version: what the sidecar's MapSync sends.
http::Response readChanges(ControllerHarness& h, ManagerApi& api, const std::string& since,
                           const std::string& want) {
  http::Request req;
  req.method = http::Method::kGet;
  req.params = {{"namespace", "demo"}, {"name", "counter"}};
  req.query = {{"since", since}, {"want", want}};
  auto out = std::make_shared<std::optional<http::Response>>();
  api.handle("assignments", std::move(req),
             http::Responder([out](http::Response r) { *out = std::move(r); }));
  EXPECT_TRUE(h.runUntil([&] { return out->has_value(); }, 30s)) << "no answer";
  http::Response r = out->value_or(http::Response{0, {}, ""});
  r.body = std::string(r.payload());  // the answers of a version share their body
  r.sharedBody.reset();
  return r;
}

TEST_F(ManagerApiTest, ChangesSinceAVersionRebuildTheCurrentMap) {
  const sharding::ShardMap before = h_.stored();
  const nlohmann::json base = sharding::toJson(before);
  StubPod& a = h_.startPod("a");
  ASSERT_EQ(call("register", "demo", "counter",
                 protocol::encode(protocol::RegisterRequest{a.name, a.uid, a.address, "1", "i"}))
                .status,
            200);
  // Its register answered after the write that recorded it.
  const sharding::ShardMap now = h_.stored();
  ASSERT_NE(now.metadata.resourceVersion, before.metadata.resourceVersion);

  http::Response r = readChanges(h_, api_, before.metadata.resourceVersion,
                                 now.metadata.resourceVersion);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["kind"], "ShardMapDelta");
  EXPECT_EQ(body["from"], before.metadata.resourceVersion);
  EXPECT_EQ(body["resourceVersion"], now.metadata.resourceVersion);
  EXPECT_EQ(body["wantKnown"], true);
  ASSERT_FALSE(body.contains("map")) << "a known version gets changes, not the map";
  auto rebuilt = sharding::applyJsonDelta(base, body["changes"]);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().toString();
  EXPECT_EQ(*rebuilt, sharding::toJson(now));
  EXPECT_EQ(body["digest"], sharding::textDigest(rebuilt->dump()));
  EXPECT_LT(body["changes"].dump().size(), r.body.size());

  // The version the sidecar already holds: no changes.
  r = readChanges(h_, api_, now.metadata.resourceVersion, now.metadata.resourceVersion);
  EXPECT_EQ(nlohmann::json::parse(r.body)["changes"], nlohmann::json::array()) << r.body;
}

// A version this replica does not hold gets no changes, and not the whole map either (a new
// leader would hold a copy per sidecar): the sidecar reads the API server.
TEST_F(ManagerApiTest, AnUnknownVersionGetsNeitherChangesNorTheMap) {
  const sharding::ShardMap now = h_.stored();
  for (const std::string since : {"", "no-such-version"}) {
    http::Response r = readChanges(h_, api_, since, now.metadata.resourceVersion);
    ASSERT_EQ(r.status, 200) << r.body;
    const auto body = nlohmann::json::parse(r.body);
    EXPECT_FALSE(body.contains("from")) << r.body;
    EXPECT_FALSE(body.contains("changes")) << r.body;
    EXPECT_FALSE(body.contains("map")) << r.body;
    EXPECT_EQ(body["resourceVersion"], now.metadata.resourceVersion);
    EXPECT_EQ(body["digest"], sharding::textDigest(sharding::toJson(now).dump()));
    EXPECT_LT(r.body.size(), 512u);
  }
}

// The watch told the sidecar of a version before this replica had the answer of its write: the
// read waits for it, and says so when it does not come.
TEST_F(ManagerApiTest, AReadWaitsForTheVersionItsWatchAnnounced) {
  const sharding::ShardMap now = h_.stored();
  const SteadyTime asked = h_.scheduler.clock().now();
  http::Response r = readChanges(h_, api_, now.metadata.resourceVersion, "future-version");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GE(h_.scheduler.clock().now() - asked, 2s) << "answered before its wait was over";
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["wantKnown"], false);
  EXPECT_EQ(body["resourceVersion"], now.metadata.resourceVersion);
}

// The sidecar takes the map's changes only from the operator: the answer carries the operator's
// token for the map's sidecars, as its calls to them do.
// Without authentication (--pod-auth=none) no caller is known to be a pod of the map: nothing
// is signed, and the sidecars read the API server.
TEST_F(ManagerApiTest, AnUnauthenticatedCallerGetsNoSignature) {
  api_.setAnswerCredentials(
      [](const std::string& map, std::function<void(StatusOr<std::string>)> done) {
        done("Bearer answer-token-for-" + map);
      });
  const std::string rv = h_.stored().metadata.resourceVersion;
  http::Response r = readChanges(h_, api_, rv, rv);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(r.headers.get("Kshard-Manager-Authorization")) << "signed for anyone";
}

TEST_F(ManagerApiTest, AReadWaitingWhenLeadershipEndsIsAnsweredNotLeader) {
  http::Request req;
  req.method = http::Method::kGet;
  req.params = {{"namespace", "demo"}, {"name", "counter"}};
  req.query = {{"since", ""}, {"want", "future-version"}};
  auto out = std::make_shared<std::optional<http::Response>>();
  api_.handle("assignments", std::move(req),
              http::Responder([out](http::Response r) { *out = std::move(r); }));
  h_.scheduler.runDue();
  ASSERT_FALSE(out->has_value());
  manager_.stopLeading();
  ASSERT_TRUE(h_.runUntil([&] { return out->has_value(); }, 1s));
  EXPECT_EQ((*out)->status, 503) << (*out)->body;
}

TEST_F(ManagerApiTest, AVersionLongerThanAnyResourceVersionIs400) {
  http::Response r = readChanges(h_, api_, std::string(65, '1'), "");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("since"), std::string::npos) << r.body;
  EXPECT_EQ(readChanges(h_, api_, "", std::string(65, '1')).status, 400);
}

TEST_F(ManagerApiTest, AWaitingReadIsAnsweredWhenItsVersionIsWritten) {
  const sharding::ShardMap before = h_.stored();
  // The fake store numbers versions one by one: the next write stores this one.
  const std::string next = std::to_string(std::stoll(before.metadata.resourceVersion) + 1);
  http::Request req;
  req.method = http::Method::kGet;
  req.params = {{"namespace", "demo"}, {"name", "counter"}};
  req.query = {{"since", before.metadata.resourceVersion}, {"want", next}};
  auto out = std::make_shared<std::optional<http::Response>>();
  api_.handle("assignments", std::move(req),
              http::Responder([out](http::Response r) { *out = std::move(r); }));
  h_.scheduler.runDue();
  EXPECT_FALSE(out->has_value()) << "answered before the version it waits for";
  StubPod& a = h_.startPod("a");
  call("register", "demo", "counter",
       protocol::encode(protocol::RegisterRequest{a.name, a.uid, a.address, "1", "i"}));
  ASSERT_TRUE(h_.runUntil([&] { return out->has_value(); }, 1s)) << "still waiting";
  const auto body = nlohmann::json::parse((*out)->payload());
  EXPECT_EQ(body["wantKnown"], true) << (*out)->payload();
  EXPECT_EQ(body["from"], before.metadata.resourceVersion);
}

TEST_F(ManagerApiTest, NotifyUnhealthyIsAccepted) {
  http::Response r = call("notify-unhealthy", "demo", "counter",
                          protocol::encode(protocol::NotifyUnhealthyRequest{"x"}));
  EXPECT_EQ(r.status, 202);
}

// Tokens as a TokenReview would read them: token -> identity.
class FakeAuthenticator final : public PodAuthenticator {
 public:
  void authenticate(const std::string& token, Callback done) override {
    ++calls;
    if (token == "api-down" || local.count(token) > 0) {
      return done(unavailable("the API server did not answer"));
    }
    auto it = identities.find(token);
    if (it == identities.end()) return done(Status(StatusCode::kUnauthenticated, "invalid token"));
    done(it->second);
  }
  StatusOr<PodIdentity> verifyLocally(const std::string& token) override {
    auto it = local.find(token);
    if (it == local.end()) return Status(StatusCode::kUnauthenticated, "invalid token");
    return it->second;
  }
  std::map<std::string, PodIdentity> identities;
  // Tokens the API server cannot review now, and what they prove by themselves.
  std::map<std::string, PodIdentity> local;
  int calls = 0;
};

class AuthenticatedManagerApiTest : public ManagerApiTest {
 protected:
  AuthenticatedManagerApiTest()
      : authed_(manager_, leadership_, h_.metrics, h_.scheduler.clock(), quiet(), &auth_) {
    a_ = &h_.startPod("a");
    b_ = &h_.startPod("b");
    auth_.identities["token-a"] = {"demo", "counter", "a", a_->uid};
    auth_.identities["token-b"] = {"demo", "counter", "b", b_->uid};
    auth_.identities["token-other-ns"] = {"other", "counter", "a", a_->uid};
  }
  http::Response registerA(std::string authorization) {
    return callOn(authed_, "register", "demo", "counter",
                  protocol::encode(protocol::RegisterRequest{a_->name, a_->uid, a_->address, "1", "inc"}),
                  std::move(authorization));
  }
  static std::string codeOf(const http::Response& r) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_object() ? j["error"].value("code", "") : "";
  }

  FakeAuthenticator auth_;
  ManagerApi authed_;
  StubPod* a_ = nullptr;
  StubPod* b_ = nullptr;
};

// The answers to reads of the map's changes are signed for the map's registered pods only: the
// signature is what their sidecars take the changes on, and a pod of another app of the
// namespace, which may read the map, gets none to show them.
TEST_F(AuthenticatedManagerApiTest, OnlyTheMapsRegisteredPodsGetSignedAnswers) {
  std::vector<std::string> asked;
  authed_.setAnswerCredentials(
      [&](const std::string& map, std::function<void(StatusOr<std::string>)> done) {
        asked.push_back(map);
        done("Bearer answer-token-for-" + map);
      });
  auth_.identities["token-intruder"] = {"demo", "other-app", "intruder-0", "intruder-uid"};
  ASSERT_EQ(registerA("Bearer token-a").status, 200);
  const std::string rv = h_.stored().metadata.resourceVersion;
  const auto read = [&](const std::string& authorization) {
    http::Request req;
    req.method = http::Method::kGet;
    req.params = {{"namespace", "demo"}, {"name", "counter"}};
    req.query = {{"since", rv}, {"want", rv}};
    req.headers.set("Authorization", authorization);
    auto out = std::make_shared<std::optional<http::Response>>();
    authed_.handle("assignments", std::move(req),
                   http::Responder([out](http::Response r) { *out = std::move(r); }));
    EXPECT_TRUE(h_.runUntil([&] { return out->has_value(); }, 30s));
    return out->value_or(http::Response{0, {}, ""});
  };
  http::Response r = read("Bearer token-a");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.get("Kshard-Manager-Authorization").value_or(""),
            "Bearer answer-token-for-demo/counter");
  EXPECT_EQ(asked, std::vector<std::string>{"demo/counter"});
  for (const char* other : {"Bearer token-intruder", "Bearer token-b"}) {  // b never registered
    r = read(other);
    ASSERT_EQ(r.status, 200) << other << ": " << r.body;
    EXPECT_FALSE(r.headers.get("Kshard-Manager-Authorization")) << other;
  }
  authed_.setAnswerCredentials(
      [](const std::string&, std::function<void(StatusOr<std::string>)> done) {
        done(unavailable("TokenRequest refused"));
      });
  r = read("Bearer token-a");
  EXPECT_EQ(r.status, 503) << "an unsigned answer would only send the sidecar to the API server";
  EXPECT_NE(r.body.find("TokenRequest refused"), std::string::npos) << r.body;
}

TEST_F(AuthenticatedManagerApiTest, APodRegistersWithItsOwnToken) {
  http::Response r = registerA("Bearer token-a");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(h_.stored().status.pods.size(), 1u);
}

TEST_F(AuthenticatedManagerApiTest, NoTokenIs401AndNothingChanges) {
  const auto before = h_.stored();
  http::Response r = registerA("");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(codeOf(r), "Unauthenticated");
  EXPECT_NE(r.body.find("audience"), std::string::npos) << r.body;
  h_.run(1s);
  EXPECT_EQ(h_.stored().status, before.status);
  EXPECT_EQ(h_.events.count("Unauthenticated"), 1);
  EXPECT_EQ(requests("register", 401), 1.0);
}

TEST_F(AuthenticatedManagerApiTest, AnInvalidTokenIs401) {
  http::Response r = registerA("Bearer forged");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(r.body.find("invalid token"), std::string::npos) << r.body;
  EXPECT_TRUE(h_.stored().status.pods.empty());
}

// The body is read only for a caller whose token was accepted: a bogus token with a malformed
// body is 401, not 400, and the body is not parsed at all.
TEST_F(AuthenticatedManagerApiTest, TheCallerIsAuthenticatedBeforeTheBodyIsParsed) {
  const std::string deep(ManagerApi::kMaxBodyBytes, '[');
  http::Response r = callOn(authed_, "register", "demo", "counter", deep, "Bearer forged");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(callOn(authed_, "register", "demo", "counter", "{", "").status, 401);
  // Accepted callers' bodies are checked: too deep is refused before it is parsed.
  r = callOn(authed_, "register", "demo", "counter", deep, "Bearer token-a");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("deeper than 64 levels"), std::string::npos) << r.body;
}

// A flood of refused calls costs one log line and one Event per map and code per interval.
TEST_F(AuthenticatedManagerApiTest, RefusalsAreReportedOncePerIntervalWithTheirCount) {
  for (int i = 0; i < 500; ++i) ASSERT_EQ(registerA("Bearer forged").status, 401);
  h_.run(100ms);
  EXPECT_EQ(h_.events.count("Unauthenticated"), 1);
  h_.run(5s);
  ASSERT_EQ(registerA("Bearer forged").status, 401);
  h_.run(100ms);
  EXPECT_EQ(h_.events.count("Unauthenticated"), 2);
  EXPECT_EQ(requests("register", 401), 501.0) << "every answer is still counted";
}

TEST_F(AuthenticatedManagerApiTest, AnotherPodsTokenIs403ForRegisterAndUnregister) {
  http::Response r = registerA("Bearer token-b");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(codeOf(r), "Forbidden");
  EXPECT_NE(r.body.find("only itself"), std::string::npos) << r.body;
  EXPECT_TRUE(h_.stored().status.pods.empty());
  h_.run(100ms);  // the Event is recorded on the controller's strand
  EXPECT_EQ(h_.events.count("Forbidden"), 1);

  ASSERT_EQ(registerA("Bearer token-a").status, 200);
  http::Response u =
      callOn(authed_, "unregister", "demo", "counter",
             protocol::encode(protocol::UnregisterRequest{a_->name, a_->uid}), "Bearer token-b");
  EXPECT_EQ(u.status, 403) << u.body;
  EXPECT_EQ(h_.stored().status.pods.size(), 1u) << "b unregistered a";
}

TEST_F(AuthenticatedManagerApiTest, ATokenFromAnotherNamespaceIs403) {
  http::Response r = registerA("Bearer token-other-ns");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("namespace"), std::string::npos) << r.body;
}

TEST_F(AuthenticatedManagerApiTest, NotifyNeedsATokenOfThatNamespace) {
  const std::string body = protocol::encode(protocol::NotifyUnhealthyRequest{"a"});
  EXPECT_EQ(callOn(authed_, "notify-unhealthy", "demo", "counter", body, "").status, 401);
  EXPECT_EQ(
      callOn(authed_, "notify-unhealthy", "demo", "counter", body, "Bearer token-other-ns").status,
      403);
  EXPECT_EQ(callOn(authed_, "notify-unhealthy", "demo", "counter", body, "Bearer token-b").status,
            202);
}

TEST_F(AuthenticatedManagerApiTest, AnApiServerThatCannotReviewIs503) {
  http::Response r = registerA("Bearer api-down");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("retry"), std::string::npos) << r.body;
  EXPECT_TRUE(h_.stored().status.pods.empty());
  h_.run(100ms);
  EXPECT_EQ(h_.events.count("Unavailable"), 0) << "an API outage is not the caller's fault";
}

// The map names every pod, its uid and address: not for other tenants.
TEST_F(AuthenticatedManagerApiTest, AssignmentsNeedATokenOfTheMapsNamespace) {
  http::Response r = callOn(authed_, "assignments", "demo", "counter", "");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(callOn(authed_, "assignments", "demo", "counter", "", "Bearer forged").status, 401);
  r = callOn(authed_, "assignments", "demo", "counter", "", "Bearer token-other-ns");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.body.find(a_->uid), std::string::npos) << r.body;
  EXPECT_EQ(callOn(authed_, "assignments", "demo", "counter", "", "Bearer token-b").status, 200);
}

// Pods keep their ownership leases through an API server outage: a renew goes on with what the
// token proves by itself; nothing else does.
TEST_F(AuthenticatedManagerApiTest, ARenewGoesOnWithTheTokenAloneWhileTheApiServerIsDown) {
  ASSERT_EQ(registerA("Bearer token-a").status, 200);
  auth_.local["down-a"] = {"demo", "counter", "a", a_->uid};
  auth_.local["down-b"] = {"demo", "counter", "b", b_->uid};
  const std::string renewA = protocol::encode(protocol::Target{a_->name, a_->uid, "inc"});
  http::Response r = callOn(authed_, "renew", "demo", "counter", renewA, "Bearer down-a");
  EXPECT_EQ(r.status, 200) << r.body;
  // Still only as itself, and a token that does not verify is still refused.
  EXPECT_EQ(callOn(authed_, "renew", "demo", "counter", renewA, "Bearer down-b").status, 403);
  EXPECT_EQ(callOn(authed_, "renew", "demo", "counter", renewA, "Bearer api-down").status, 503);
  // Register needs the API server's word.
  EXPECT_EQ(registerA("Bearer down-a").status, 503);
}

// The manager API in front of the real authenticator, whose API server counts TokenReviews: a
// flood of calls with tokens that are not the cluster's costs none.
TEST_F(ManagerApiTest, AFloodOfBogusTokensMakesNoTokenReview) {
  kube::testing::FakeTransport transport;
  transport.setHandler([](const http::Request&) {
    return std::optional<StatusOr<http::Response>>(unavailable("no API server in this test"));
  });
  SeededRandom random(1);
  kube::Client api(transport, h_.scheduler, random, quiet(),
                   kube::ClientOptions{.qps = 0, .maxRetries = 0});
  const kube::JwtSigner cluster = kube::JwtSigner::generate("ES256", "cluster");
  const kube::JwtSigner attacker = kube::JwtSigner::generate("ES256", "cluster");
  kube::FixedIssuerKeys keys;
  const std::string issuer = "https://kubernetes.default.svc";
  keys.set(issuer, std::move(*kube::JwkSet::parse(cluster.jwks())));
  kube::TokenVerifier verifier(keys, h_.scheduler.clock(), {.audience = "kshard"});
  TokenReviewAuthenticator auth(api, h_.scheduler.manualClock(), &verifier);
  ManagerApi authed(manager_, leadership_, h_.metrics, h_.scheduler.clock(), quiet(), &auth);
  StubPod& a = h_.startPod("a");
  const std::string body =
      protocol::encode(protocol::RegisterRequest{a.name, a.uid, a.address, "1", "inc"});
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               h_.scheduler.clock().wallNow().time_since_epoch())
                               .count();
  for (int i = 0; i < 1000; ++i) {
    // Forged with the same kid, garbage, and a token for the API server's audience.
    const std::string token =
        i % 3 == 0   ? attacker.sign(kube::serviceAccountClaims(issuer, "kshard", "demo", "counter",
                                                                a.name, a.uid, now, now + 600 + i))
        : i % 3 == 1 ? "garbage-" + std::to_string(i)
                     : cluster.sign(kube::serviceAccountClaims(issuer, issuer, "demo", "counter",
                                                               a.name, a.uid, now, now + 600 + i));
    ASSERT_EQ(callOn(authed, "register", "demo", "counter", body, "Bearer " + token).status, 401)
        << i;
  }
  EXPECT_EQ(auth.reviews(), 0u);
  EXPECT_EQ(transport.requestCount(), 0u) << "a bogus token cost a TokenReview";
  EXPECT_TRUE(h_.stored().status.pods.empty());
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
