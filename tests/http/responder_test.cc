#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http/server.h"

namespace kshard::http {
namespace {

TEST(ResponderTest, SendsOnceAndIgnoresTheSecondAnswer) {
  std::vector<int> sent;
  {
    Responder r([&sent](Response response) { sent.push_back(response.status); });
    EXPECT_FALSE(r.sent());
    r.send(Response::json(201, "{}"));
    EXPECT_TRUE(r.sent());
    r.send(Response::json(202, "{}"));
  }
  EXPECT_EQ(sent, std::vector<int>{201});
}

TEST(ResponderTest, DestroyedUnansweredSends500) {
  std::vector<Response> sent;
  {
    Responder r([&sent](Response response) { sent.push_back(std::move(response)); });
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, 500);
  const auto body = nlohmann::json::parse(sent[0].body);
  EXPECT_EQ(body["error"]["code"], "Internal");
  EXPECT_EQ(body["error"]["message"], "handler did not answer");
}

TEST(ResponderTest, MovedFromResponderDoesNotAnswer) {
  std::vector<int> sent;
  {
    Responder a([&sent](Response response) { sent.push_back(response.status); });
    Responder b(std::move(a));
    b.send(Response::json(200, "{}"));
  }
  EXPECT_EQ(sent, std::vector<int>{200});
}

TEST(ResponderTest, MoveAssignOverUnansweredAnswersIt) {
  std::vector<int> first;
  std::vector<int> second;
  Responder a([&first](Response response) { first.push_back(response.status); });
  a = Responder([&second](Response response) { second.push_back(response.status); });
  EXPECT_EQ(first, std::vector<int>{500});
  a.send(Response::json(204, ""));
  EXPECT_EQ(second, std::vector<int>{204});
}

class RecordingWriter : public StreamWriter {
 public:
  bool write(std::string) override { return true; }
  void finish() override {}
  void abort() override {}
};

TEST(ResponderTest, StartStreamConsumesTheResponder) {
  int started = 0;
  int sent = 0;
  Responder r([&sent](Response) { ++sent; },
              [&started](int status, Headers) -> std::unique_ptr<StreamWriter> {
                EXPECT_EQ(status, 200);
                ++started;
                return std::make_unique<RecordingWriter>();
              });
  auto writer = r.startStream(200, {});
  ASSERT_TRUE(writer.ok());
  EXPECT_TRUE(r.sent());
  EXPECT_FALSE(r.startStream(200, {}).ok());
  r.send(Response{});
  EXPECT_EQ(started, 1);
  EXPECT_EQ(sent, 0);
}

TEST(ResponderTest, StartStreamWithoutSupportFailsAndKeepsTheResponder) {
  int sent = 0;
  {
    Responder r([&sent](Response) { ++sent; });
    const auto writer = r.startStream(200, {});
    ASSERT_FALSE(writer.ok());
    EXPECT_EQ(writer.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_FALSE(r.sent());
  }
  EXPECT_EQ(sent, 1);
}

// A server's own target: answers carry the token, and what the Responder keeps for the target is
// released after the target, once the answer is in.
TEST(ResponderTest, AnswersItsTargetWithTheTokenAndReleasesKeepAfterIt) {
  struct Order {
    std::vector<std::string> events;
  };
  auto order = std::make_shared<Order>();
  struct Target final : ResponseTarget {
    explicit Target(std::shared_ptr<Order> o) : order(std::move(o)) {}
    ~Target() override { order->events.push_back("target released"); }
    void respond(std::uint64_t token, Response&& r) override {
      order->events.push_back("answer " + std::to_string(token) + " " + std::to_string(r.status));
    }
    std::shared_ptr<Order> order;
  };
  struct Keep {
    explicit Keep(std::shared_ptr<Order> o) : order(std::move(o)) {}
    ~Keep() { order->events.push_back("keep released"); }
    std::shared_ptr<Order> order;
  };
  {
    Responder r(std::make_shared<Target>(order), 7, std::make_shared<Keep>(order));
    Responder moved = std::move(r);
    EXPECT_TRUE(r.sent());  // NOLINT(bugprone-use-after-move): a moved-from Responder is spent
    EXPECT_FALSE(moved.sent());
    // No stream on a target that cannot: the Responder stays usable.
    EXPECT_EQ(moved.startStream(200, {}).status().code(), StatusCode::kFailedPrecondition);
    moved.send(Response{204, {}, ""});
    EXPECT_TRUE(moved.sent());
    moved.send(Response{500, {}, ""});
  }
  EXPECT_EQ(order->events,
            (std::vector<std::string>{"answer 7 204", "target released", "keep released"}));
}

}  // namespace
}  // namespace kshard::http
