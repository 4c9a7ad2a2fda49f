#include "http/router.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kshard::http {
namespace {

// Dispatches a request and returns what was answered; handlers answer with their name.
class RouterTest : public ::testing::Test {
 protected:
  void addNamed(Method method, std::string pattern, std::string name) {
    router_.add(method, pattern, [this, name](Request request, Responder responder) {
      last_ = std::move(request);
      Response r;
      r.body = name;
      responder.send(std::move(r));
    });
  }

  Response dispatch(Method method, std::string target) {
    std::optional<Response> answer;
    Request request;
    request.method = method;
    request.target = std::move(target);
    router_.dispatch(std::move(request),
                     Responder([&answer](Response r) { answer = std::move(r); }));
    EXPECT_TRUE(answer.has_value()) << "the router did not answer";
    return answer.value_or(Response{});
  }

  static std::string errorCode(const Response& r) {
    return nlohmann::json::parse(r.body)["error"]["code"].get<std::string>();
  }

  Router router_;
  Request last_;
};

TEST_F(RouterTest, CapturesArePercentDecodedAfterSplitting) {
  addNamed(Method::kPost, "/v1/entities/{type}/{id}", "entity");
  const Response r = dispatch(Method::kPost, "/v1/entities/counter/a%2Fb%20c");
  EXPECT_EQ(r.body, "entity");
  EXPECT_EQ(last_.param("type"), "counter");
  EXPECT_EQ(last_.param("id"), "a/b c");
  EXPECT_EQ(last_.path(), "/v1/entities/counter/a%2Fb%20c");
}

TEST_F(RouterTest, CaptureMatchesExactlyOneSegment) {
  addNamed(Method::kPost, "/v1/entities/{type}/{id}", "entity");
  EXPECT_EQ(dispatch(Method::kPost, "/v1/entities/counter/a/b").status, 404);
  EXPECT_EQ(dispatch(Method::kPost, "/v1/entities/counter").status, 404);
  EXPECT_EQ(dispatch(Method::kPost, "/v1/entities/counter/").status, 404);
}

TEST_F(RouterTest, CapturesBetweenLiteralsLandInTheirNames) {
  addNamed(Method::kGet, "/{a}/x/{b}/y/{c}", "three");
  EXPECT_EQ(dispatch(Method::kGet, "/1/x/2/y/3").body, "three");
  EXPECT_EQ(last_.param("a"), "1");
  EXPECT_EQ(last_.param("b"), "2");
  EXPECT_EQ(last_.param("c"), "3");
}

TEST_F(RouterTest, APathLongerThanAnyRouteIsNotFound) {
  addNamed(Method::kGet, "/{a}/{b}", "two");
  std::string target;
  for (int i = 0; i < 100; ++i) target += "/s";
  EXPECT_EQ(dispatch(Method::kGet, target).status, 404);
  EXPECT_EQ(dispatch(Method::kGet, "/s/t").body, "two");
}

TEST_F(RouterTest, LiteralSegmentBeatsCapture) {
  addNamed(Method::kPost, "/v1/shards/{op}", "capture");
  addNamed(Method::kPost, "/v1/shards/assign", "literal");
  EXPECT_EQ(dispatch(Method::kPost, "/v1/shards/assign").body, "literal");
  EXPECT_EQ(dispatch(Method::kPost, "/v1/shards/unassign").body, "capture");
  EXPECT_EQ(last_.param("op"), "unassign");
}

TEST_F(RouterTest, FallsBackToCaptureWhenLiteralBranchLeadsNowhere) {
  addNamed(Method::kGet, "/a/b/c", "literal");
  addNamed(Method::kGet, "/a/{x}/d", "capture");
  EXPECT_EQ(dispatch(Method::kGet, "/a/b/d").body, "capture");
  EXPECT_EQ(last_.param("x"), "b");
  EXPECT_EQ(dispatch(Method::kGet, "/a/b/c").body, "literal");
}

TEST_F(RouterTest, MethodOnAnotherMatchingRouteIsFound) {
  addNamed(Method::kGet, "/a/b", "get-literal");
  addNamed(Method::kPost, "/a/{x}", "post-capture");
  EXPECT_EQ(dispatch(Method::kPost, "/a/b").body, "post-capture");
  EXPECT_EQ(dispatch(Method::kGet, "/a/b").body, "get-literal");
}

TEST_F(RouterTest, UnknownPathIsJsonNotFound) {
  addNamed(Method::kGet, "/v1/ping", "ping");
  const Response r = dispatch(Method::kGet, "/v1/pong");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(errorCode(r), "NotFound");
  EXPECT_EQ(r.headers.get("Content-Type"), "application/json");
}

TEST_F(RouterTest, OtherMethodIsMethodNotAllowedWithAllowHeader) {
  addNamed(Method::kGet, "/v1/shard-map", "get");
  addNamed(Method::kDelete, "/v1/shard-map", "delete");
  const Response r = dispatch(Method::kPost, "/v1/shard-map");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(errorCode(r), "MethodNotAllowed");
  EXPECT_EQ(r.headers.get("Allow"), "GET, DELETE");
}

TEST_F(RouterTest, MalformedEscapeIsBadRequest) {
  addNamed(Method::kPost, "/v1/entities/{type}/{id}", "entity");
  const Response r = dispatch(Method::kPost, "/v1/entities/counter/a%2");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(errorCode(r), "InvalidArgument");
  EXPECT_EQ(dispatch(Method::kPost, "/v1/entities/counter/a?mode=%zz").status, 400);
}

TEST_F(RouterTest, TargetMustBeAnAbsolutePath) {
  addNamed(Method::kGet, "/", "root");
  EXPECT_EQ(dispatch(Method::kGet, "http://example/").status, 400);
  EXPECT_EQ(dispatch(Method::kGet, "*").status, 400);
  EXPECT_EQ(dispatch(Method::kGet, "/").body, "root");
}

TEST_F(RouterTest, QueryIsDecodedAndSeparatedFromThePath) {
  addNamed(Method::kPost, "/v1/entities/{type}/{id}", "entity");
  const Response r = dispatch(Method::kPost, "/v1/entities/c/x?mode=tell&q=a+b%26c&flag#frag");
  EXPECT_EQ(r.body, "entity");
  EXPECT_EQ(last_.param("id"), "x");
  EXPECT_EQ(last_.queryParam("mode"), "tell");
  EXPECT_EQ(last_.queryParam("q"), "a b&c");
  EXPECT_EQ(last_.queryParam("flag"), "");
  EXPECT_EQ(last_.path(), "/v1/entities/c/x");
}

TEST_F(RouterTest, LaterRouteWithSamePatternWins) {
  addNamed(Method::kGet, "/x/{a}", "first");
  addNamed(Method::kGet, "/x/{b}", "second");
  EXPECT_EQ(dispatch(Method::kGet, "/x/1").body, "second");
  EXPECT_EQ(last_.param("b"), "1");
  EXPECT_EQ(last_.param("a"), "");
}

TEST_F(RouterTest, LiteralSegmentsCompareDecoded) {
  addNamed(Method::kGet, "/v1/ping", "ping");
  EXPECT_EQ(dispatch(Method::kGet, "/v1/%70ing").body, "ping");
}

TEST_F(RouterTest, HandlerThatThrowsIsAnswered500) {
  router_.add(Method::kGet, "/boom", [](Request, Responder) { throw std::runtime_error("boom"); });
  const Response r = dispatch(Method::kGet, "/boom");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(errorCode(r), "Internal");
}

// The handler owns the request (and its target) and is gone when the router logs what it threw:
// the log names the route, and reads nothing of the request.
TEST_F(RouterTest, ARoutesOwnBodyLimitIsFoundFromTheTargetAlone) {
  addNamed(Method::kPost, "/v1/entities/{type}/{id}", "entity");
  EXPECT_FALSE(router_.hasBodyLimits()) << "no route has a limit yet";
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "/v1/entities/c/a"), std::nullopt);
  router_.add(
      Method::kPost, "/v1/shards/{verb}", [](Request, Responder) {},
      RouteOptions{.maxBodyBytes = 16384});
  EXPECT_TRUE(router_.hasBodyLimits());
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "/v1/shards/assign?x=1#f"), 16384u);
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "/v1/%73hards/assign"), 16384u);
  // Routes without one, other methods, unknown and malformed targets: the server's limit.
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "/v1/entities/c/a"), std::nullopt);
  EXPECT_EQ(router_.bodyLimit(Method::kGet, "/v1/shards/assign"), std::nullopt);
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "/v1/nothing"), std::nullopt);
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "/v1/shards/%zz"), std::nullopt);
  EXPECT_EQ(router_.bodyLimit(Method::kPost, "v1/shards/assign"), std::nullopt);
}

TEST(RouterLogTest, AHandlerThatThrowsIsLoggedByItsRoute) {
  std::vector<std::string> lines;
  Router router(Logger("test", LogLevel::kError,
                       [&lines](std::string_view line) { lines.emplace_back(line); }));
  router.add(Method::kPost, "/v1/entities/{type}/{id}",
             [](Request, Responder) { throw std::runtime_error("boom"); });
  Request request;
  request.method = Method::kPost;
  request.target = "/v1/entities/counter/" + std::string(200, 'x');  // on the heap
  std::optional<Response> answer;
  router.dispatch(std::move(request), Responder([&answer](Response r) { answer = std::move(r); }));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 500);
  ASSERT_EQ(lines.size(), 1u);
  const auto logged = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(logged["msg"], "http handler threw");
  EXPECT_EQ(logged["route"], "POST /v1/entities/{type}/{id}");
  EXPECT_EQ(logged["error"], "boom");
}

TEST(ParseQueryTest, FirstOfRepeatedKeysWins) {
  std::map<std::string, std::string> q;
  ASSERT_TRUE(parseQuery("a=1&a=2&&b", q));
  EXPECT_EQ(q["a"], "1");
  EXPECT_EQ(q["b"], "");
  EXPECT_EQ(q.size(), 2u);
}

}  // namespace
}  // namespace kshard::http
