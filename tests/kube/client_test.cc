#include "kube/client.h"

#include <gtest/gtest.h>

#include <deque>
#include <optional>

#include "tests/kube/fake_transport.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeTransport;
using testing::jsonResponse;

const ResourceRef kShardMaps{"kshard.io", "v1alpha1", "shardmaps", Scope::kNamespaced};

http::Response withHeader(http::Response r, const std::string& name, const std::string& value) {
  r.headers.set(name, value);
  return r;
}

std::string statusBody(int code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", message}}
      .dump();
}

// A script of answers consumed in order; requests beyond it park.
class Script {
 public:
  explicit Script(FakeTransport& t) {
    t.setHandler([this](const http::Request&) -> std::optional<StatusOr<http::Response>> {
      std::lock_guard lock(mu_);
      if (answers_.empty()) return std::nullopt;
      auto a = std::move(answers_.front());
      answers_.pop_front();
      return a;
    });
  }
  void then(StatusOr<http::Response> r) {
    std::lock_guard lock(mu_);
    answers_.push_back(std::move(r));
  }

 private:
  std::mutex mu_;
  std::deque<StatusOr<http::Response>> answers_;
};

struct Result {
  std::optional<StatusOr<json>> value;
  JsonCallback callback() {
    return [this](StatusOr<json> r) { value.emplace(std::move(r)); };
  }
};

class ClientTest : public ::testing::Test {
 protected:
  ClientOptions options() {
    ClientOptions o;
    o.userAgent = "kshard-operator/1.2.3";
    o.retryBackoff = {milliseconds(100), seconds(1), 2.0, 0.0};
    return o;
  }
  std::unique_ptr<Client> makeClient(ClientOptions o, std::shared_ptr<TokenSource> token = nullptr,
                                     std::string prefix = "") {
    return std::make_unique<Client>(transport_, scheduler_, random_, logger_, std::move(o),
                                    std::move(token), std::move(prefix));
  }

  FakeTransport transport_;
  Script script_{transport_};
  ManualScheduler scheduler_;
  SeededRandom random_{1};
  Logger logger_{"kube-test", LogLevel::kError, [](std::string_view) {}};
};

TEST_F(ClientTest, GetSendsUserAgentAcceptAndBearerToken) {
  auto client = makeClient(options(), std::make_shared<StaticTokenSource>("t0k"), "/prefix");
  script_.then(jsonResponse(200, R"({"kind":"Pod","metadata":{"name":"a"}})"));
  auto pod = client->get(resources::kPods, "demo", "a");
  ASSERT_TRUE(pod.ok()) << pod.status().toString();
  EXPECT_EQ((*pod)["metadata"]["name"], "a");
  auto reqs = transport_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, http::Method::kGet);
  EXPECT_EQ(reqs[0].target, "/prefix/api/v1/namespaces/demo/pods/a");
  EXPECT_EQ(reqs[0].headers.get("User-Agent"), "kshard-operator/1.2.3");
  EXPECT_EQ(reqs[0].headers.get("Authorization"), "Bearer t0k");
  EXPECT_EQ(reqs[0].headers.get("Accept"), "application/json");
  EXPECT_EQ(reqs[0].timeout, seconds(30));
}

TEST_F(ClientTest, ConflictOnUpdateIsTypedKeepsTheMessageAndIsNotRetried) {
  auto client = makeClient(options());
  script_.then(jsonResponse(409, statusBody(409, "Conflict",
                                            "Operation cannot be fulfilled on shardmaps.kshard.io "
                                            "\"counter\": the object has been modified")));
  json sm = {{"metadata", {{"name", "counter"}, {"resourceVersion", "41"}}}, {"status", {}}};
  auto r = client->updateStatus(kShardMaps, "demo", sm);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict);
  EXPECT_NE(r.status().message().find("the object has been modified"), std::string::npos);
  EXPECT_NE(r.status().message().find("update shardmaps.kshard.io/status demo/counter"),
            std::string::npos)
      << r.status().message();
  ASSERT_EQ(transport_.requestCount(), 1u);
  const auto req = transport_.requests()[0];
  EXPECT_EQ(req.method, http::Method::kPut);
  EXPECT_EQ(json::parse(req.body)["metadata"]["resourceVersion"], "41");
  EXPECT_EQ(req.headers.get("Content-Type"), "application/json");
}

TEST_F(ClientTest, TooManyRequestsWaitsRetryAfterThenRetriesEvenAWrite) {
  auto client = makeClient(options());
  script_.then(withHeader(jsonResponse(429, statusBody(429, "TooManyRequests", "slow down")),
                          "Retry-After", "3"));
  script_.then(jsonResponse(201, R"({"metadata":{"name":"x"}})"));
  Result result;
  client->callAsync(createRequest(resources::kConfigMaps, "demo", {{"metadata", {{"name", "x"}}}}),
                    result.callback());
  EXPECT_EQ(transport_.requestCount(), 1u);
  scheduler_.advance(milliseconds(2999));
  EXPECT_EQ(transport_.requestCount(), 1u) << "retried before Retry-After";
  EXPECT_FALSE(result.value.has_value());
  scheduler_.advance(milliseconds(1));
  EXPECT_EQ(transport_.requestCount(), 2u);
  ASSERT_TRUE(result.value.has_value());
  EXPECT_TRUE(result.value->ok());
}

TEST_F(ClientTest, ServerErrorsAreRetriedOnGetOnly) {
  auto client = makeClient(options());
  script_.then(jsonResponse(503, statusBody(503, "ServiceUnavailable", "etcd down")));
  script_.then(jsonResponse(200, R"({"items":[]})"));
  Result get;
  client->callAsync(listRequest(resources::kPods, "demo"), get.callback());
  scheduler_.advance(milliseconds(100));
  ASSERT_TRUE(get.value.has_value());
  EXPECT_TRUE(get.value->ok());
  EXPECT_EQ(transport_.requestCount(), 2u);

  script_.then(jsonResponse(503, statusBody(503, "ServiceUnavailable", "etcd down")));
  Result post;
  client->callAsync(createRequest(resources::kConfigMaps, "demo", {{"metadata", {{"name", "x"}}}}),
                    post.callback());
  ASSERT_TRUE(post.value.has_value());
  EXPECT_EQ(post.value->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(transport_.requestCount(), 3u);
  EXPECT_EQ(scheduler_.pending(), 0u);
}

TEST_F(ClientTest, ServerErrorWithRetryAfterIsRetriedForAnyVerb) {
  auto client = makeClient(options());
  script_.then(withHeader(jsonResponse(503, statusBody(503, "ServiceUnavailable", "shutting down")),
                          "Retry-After", "1"));
  script_.then(jsonResponse(200, R"({"metadata":{"name":"x"}})"));
  Result patch;
  client->callAsync(patchRequest(resources::kPods, "demo", "x", PatchType::kMerge,
                                 {{"metadata", {{"labels", {{"a", "b"}}}}}}),
                    patch.callback());
  scheduler_.advance(seconds(1));
  ASSERT_TRUE(patch.value.has_value());
  EXPECT_TRUE(patch.value->ok());
}

TEST_F(ClientTest, TransportErrorsAreRetriedOnGetAndNotOnWrites) {
  auto client = makeClient(options());
  script_.then(unavailable("connection refused"));
  script_.then(deadlineExceeded("timed out"));
  script_.then(jsonResponse(200, "{}"));
  Result get;
  client->callAsync(getRequest(resources::kPods, "demo", "a"), get.callback());
  scheduler_.advance(milliseconds(100));  // first backoff: 100 ms
  EXPECT_FALSE(get.value.has_value());
  scheduler_.advance(milliseconds(200));  // then 200 ms
  ASSERT_TRUE(get.value.has_value());
  EXPECT_TRUE(get.value->ok());

  script_.then(unavailable("connection reset"));
  Result del;
  DeleteOptions o;
  o.preconditionUid = "u";
  client->callAsync(deleteRequest(resources::kPods, "demo", "a", o), del.callback());
  ASSERT_TRUE(del.value.has_value());
  EXPECT_EQ(del.value->status().code(), StatusCode::kUnavailable);
  EXPECT_NE(del.value->status().message().find("delete pods demo/a"), std::string::npos);
}

TEST_F(ClientTest, GivesUpAfterMaxRetries) {
  ClientOptions o = options();
  o.maxRetries = 2;
  auto client = makeClient(o);
  for (int i = 0; i < 3; ++i) script_.then(unavailable("connection refused"));
  Result get;
  client->callAsync(getRequest(resources::kPods, "demo", "a"), get.callback());
  scheduler_.advance(seconds(10));
  ASSERT_TRUE(get.value.has_value());
  EXPECT_EQ(get.value->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(transport_.requestCount(), 3u);
}

// A token source that rotates on a 401, like a re-read ServiceAccount token file.
class RotatingToken final : public TokenSource {
 public:
  StatusOr<std::string> token() override {
    std::lock_guard lock(mu_);
    return current_;
  }
  bool onUnauthorized(const std::string& rejected) override {
    std::lock_guard lock(mu_);
    if (rejected != current_) return true;
    if (rotations_ == 0) return false;
    --rotations_;
    current_ = "tok-" + std::to_string(++n_);
    return true;
  }
  void allowRotations(int n) {
    std::lock_guard lock(mu_);
    rotations_ = n;
  }

 private:
  std::mutex mu_;
  std::string current_ = "tok-0";
  int n_ = 0;
  int rotations_ = 0;
};

TEST_F(ClientTest, UnauthorizedRetriesOnceWithTheRotatedToken) {
  auto token = std::make_shared<RotatingToken>();
  token->allowRotations(1);
  auto client = makeClient(options(), token);
  script_.then(jsonResponse(401, statusBody(401, "Unauthorized", "Unauthorized")));
  script_.then(jsonResponse(201, R"({"metadata":{"name":"x"}})"));
  auto r = client->create(resources::kConfigMaps, "demo", {{"metadata", {{"name", "x"}}}});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  auto reqs = transport_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].headers.get("Authorization"), "Bearer tok-0");
  EXPECT_EQ(reqs[1].headers.get("Authorization"), "Bearer tok-1");

  // No fresher token: the 401 is the answer.
  script_.then(jsonResponse(401, statusBody(401, "Unauthorized", "Unauthorized")));
  auto denied = client->get(resources::kPods, "demo", "a");
  EXPECT_EQ(denied.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(transport_.requestCount(), 3u);
}

TEST_F(ClientTest, RateLimiterSpacesRequestsBeyondTheBurst) {
  ClientOptions o = options();
  o.qps = 2;
  o.burst = 1;
  auto client = makeClient(o);
  for (int i = 0; i < 3; ++i) script_.then(jsonResponse(200, "{}"));
  Result a, b, c;
  client->callAsync(getRequest(resources::kPods, "demo", "a"), a.callback());
  client->callAsync(getRequest(resources::kPods, "demo", "b"), b.callback());
  client->callAsync(getRequest(resources::kPods, "demo", "c"), c.callback());
  EXPECT_TRUE(a.value.has_value());
  EXPECT_FALSE(b.value.has_value());
  scheduler_.advance(milliseconds(500));
  EXPECT_TRUE(b.value.has_value());
  EXPECT_FALSE(c.value.has_value());
  scheduler_.advance(milliseconds(500));
  EXPECT_TRUE(c.value.has_value());
}

TEST_F(ClientTest, ARequestThatWouldWaitTooLongForTheRateLimitFailsAtOnce) {
  ClientOptions o = options();
  o.qps = 2;
  o.burst = 1;
  o.maxRateLimitWait = seconds(1);
  auto client = makeClient(o);
  for (int i = 0; i < 3; ++i) script_.then(jsonResponse(200, "{}"));
  Result a, b, c, refused;
  for (Result* r : {&a, &b, &c, &refused}) {
    client->callAsync(getRequest(resources::kPods, "demo", "x"), r->callback());
  }
  ASSERT_TRUE(refused.value.has_value()) << "the fourth call queued behind 1.5 s of others";
  EXPECT_EQ(refused.value->status().code(), StatusCode::kResourceExhausted)
      << refused.value->status().toString();
  EXPECT_NE(refused.value->status().message().find("get pods"), std::string::npos)
      << refused.value->status().message();
  scheduler_.advance(seconds(1));
  EXPECT_TRUE(c.value.has_value() && c.value->ok()) << "the calls within the wait still go out";
  EXPECT_EQ(transport_.requestCount(), 3u);
}

TEST_F(ClientTest, ListAllFollowsContinueTokens) {
  auto client = makeClient(options());
  script_.then(jsonResponse(
      200,
      R"({"metadata":{"resourceVersion":"100","continue":"c1"},"items":[{"metadata":{"name":"a"}}]})"));
  script_.then(jsonResponse(
      200,
      R"({"metadata":{"resourceVersion":"100","continue":"c2"},"items":[{"metadata":{"name":"b"}}]})"));
  script_.then(jsonResponse(
      200, R"({"metadata":{"resourceVersion":"100"},"items":[{"metadata":{"name":"c"}}]})"));
  ListOptions o;
  o.labelSelector = "app=counter";
  o.limit = 1;
  auto all = client->listAll(resources::kPods, "demo", o);
  ASSERT_TRUE(all.ok()) << all.status().toString();
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[2]["metadata"]["name"], "c");
  EXPECT_EQ(all->resourceVersion, "100");
  auto reqs = transport_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].target, "/api/v1/namespaces/demo/pods?labelSelector=app%3Dcounter&limit=1");
  EXPECT_EQ(reqs[2].target,
            "/api/v1/namespaces/demo/pods?labelSelector=app%3Dcounter&limit=1&continue=c2");
}

TEST_F(ClientTest, ListAllFallsBackToOneUnpagedListWhenTheContinueTokenExpires) {
  auto client = makeClient(options());
  script_.then(jsonResponse(
      200,
      R"({"metadata":{"resourceVersion":"100","continue":"c1"},"items":[{"metadata":{"name":"a"}}]})"));
  script_.then(
      jsonResponse(410, statusBody(410, "Expired", "The provided continue parameter is too old")));
  script_.then(jsonResponse(
      200,
      R"({"metadata":{"resourceVersion":"250"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})"));
  auto all = client->listAll(resources::kPods, "demo");
  ASSERT_TRUE(all.ok()) << all.status().toString();
  EXPECT_EQ(all->items.size(), 2u);
  EXPECT_EQ(all->resourceVersion, "250");
  EXPECT_EQ(transport_.requests()[2].target, "/api/v1/namespaces/demo/pods");
}

TEST_F(ClientTest, InvalidRequestFailsWithoutSending) {
  auto client = makeClient(options());
  auto r = client->update(resources::kPods, "demo", json{{"spec", {}}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transport_.requestCount(), 0u);
}

TEST_F(ClientTest, DestructorCancelsCallsWaitingToRetry) {
  auto client = makeClient(options());
  script_.then(withHeader(jsonResponse(429, statusBody(429, "TooManyRequests", "slow down")),
                          "Retry-After", "30"));
  Result r;
  client->callAsync(getRequest(resources::kPods, "demo", "a"), r.callback());
  EXPECT_FALSE(r.value.has_value());
  client.reset();
  ASSERT_TRUE(r.value.has_value());
  EXPECT_EQ(r.value->status().code(), StatusCode::kCancelled);
  scheduler_.advance(seconds(60));
  EXPECT_EQ(transport_.requestCount(), 1u);
}

TEST_F(ClientTest, NonJsonSuccessBodyIsAnError) {
  auto client = makeClient(options());
  script_.then(jsonResponse(200, "<html>proxy</html>"));
  auto r = client->get(resources::kPods, "demo", "a");
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST_F(ClientTest, WatchOpenErrorIsTyped) {
  auto client = makeClient(options());
  transport_.setStreamHandler([](const http::Request&) {
    return std::pair<int, std::string>{
        410, statusBody(410, "Expired", "too old resource version: 5 (900)")};
  });
  WatchOptions o;
  o.resourceVersion = "5";
  auto w = client->watch(resources::kPods, "demo", o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kGone);
  EXPECT_NE(w.status().message().find("too old resource version"), std::string::npos);
}

}  // namespace
}  // namespace kshard::kube
