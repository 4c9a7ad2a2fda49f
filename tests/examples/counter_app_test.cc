#include "examples/counter/counter_app.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "http/factory.h"
#include "tests/support/scratch_dir.h"

namespace kshard::examples {
namespace {

using nlohmann::json;

std::unique_ptr<http::Client> clientFor(std::uint16_t port) {
  http::ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
  return std::move(*http::makeClient(http::Backend::kBeast, o));
}

class CounterAppTest : public ::testing::Test {
 protected:
  CounterAppTest() : store_(dir_) {
    // A stand-in for the sidecar's app API that records what the public API sent it.
    sidecarServer_ = http::makeServer(http::Backend::kBeast, {});
    sidecarServer_->route(http::Method::kPost, "/v1/entities/{type}/{id}",
                          [this](http::Request r, http::Responder res) {
                            forwarded_ = std::string(r.param("id")) + " " + r.body;
                            res.send(http::Response::json(200, R"({"value":1})"));
                          });
    sidecarServer_->route(http::Method::kPost, "/v1/topics/{topic}",
                          [this](http::Request r, http::Responder res) {
                            forwarded_ = r.target + " " + r.body;
                            res.send(http::Response::json(200, R"({"pods":3,"accepted":3})"));
                          });
    EXPECT_TRUE(sidecarServer_->start().ok());
    sidecar_ = clientFor(sidecarServer_->port());
    app_ = std::make_unique<CounterApp>(store_, *sidecar_, SystemClock::instance(),
                                        CounterAppOptions{"pod-a", dir_ + "/events.log"},
                                        Logger("test", LogLevel::kError));
    entities_ = http::makeServer(http::Backend::kBeast, {});
    app_->addEntityRoutes(*entities_);
    public_ = http::makeServer(http::Backend::kBeast, {});
    app_->addPublicRoutes(*public_);
    EXPECT_TRUE(entities_->start().ok());
    EXPECT_TRUE(public_->start().ok());
    client_ = clientFor(entities_->port());
  }

  StatusOr<http::Response> post(const std::string& target, const std::string& body,
                                std::uint64_t epoch = 5) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = target;
    r.body = body;
    r.headers.set("Kshard-Shard", "7");
    r.headers.set("Kshard-Epoch", std::to_string(epoch));
    return client_->sendSync(std::move(r));
  }
  // A callback as a sidecar process sends it: an increment (or a stop, for a target ending in
  // /stop) with that process's incarnation and turn number (neither header when empty or 0).
  StatusOr<http::Response> callback(const std::string& target, const std::string& incarnation,
                                    std::uint64_t turn) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = target;
    r.body = target.ends_with("/stop") ? "" : R"({"op":"increment"})";
    r.headers.set("Kshard-Shard", "7");
    r.headers.set("Kshard-Epoch", "5");
    if (!incarnation.empty()) r.headers.set("Kshard-Incarnation", incarnation);
    if (turn != 0) r.headers.set("Kshard-Turn", std::to_string(turn));
    return client_->sendSync(std::move(r));
  }
  std::vector<json> events() {
    std::vector<json> out;
    std::ifstream in(dir_ + "/events.log");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

  // First, so that it is removed last, after everything that writes into it.
  kshard::testing::ScratchDir scratch_{"counter-app"};
  std::string dir_ = scratch_.path();
  CounterStore store_;
  std::unique_ptr<http::Server> sidecarServer_;
  std::unique_ptr<http::Client> sidecar_;
  std::string forwarded_;
  std::unique_ptr<CounterApp> app_;
  std::unique_ptr<http::Server> entities_;
  std::unique_ptr<http::Server> public_;
  std::unique_ptr<http::Client> client_;
};

TEST_F(CounterAppTest, IncrementsPersistAndSurviveAStop) {
  ASSERT_TRUE(store_.save("c1", {10, 1}).ok());
  auto r = post("/kshard/entities/counter/c1", R"({"op":"increment"})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["value"], 11);
  EXPECT_EQ(store_.load("c1")->value, 11) << "an acknowledged increment was not saved";
  EXPECT_EQ(store_.load("c1")->epoch, 5u);
  ASSERT_EQ(post("/kshard/entities/counter/c1/stop", "")->status, 200);
  EXPECT_EQ(app_->activeCounters(), 0u);
  auto again = post("/kshard/entities/counter/c1", R"({"op":"increment","by":4})", 6);
  EXPECT_EQ(json::parse(again->body)["value"], 15);
  const auto ev = events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["event"], "activate");
  EXPECT_EQ(ev[0]["pod"], "pod-a");
  EXPECT_EQ(ev[0]["shard"], "7");
  EXPECT_EQ(ev[1]["event"], "stop");
  EXPECT_EQ(ev[1]["value"], 11);
  EXPECT_EQ(ev[2]["event"], "activate");
  EXPECT_LE(ev[0]["ts_us"].get<std::int64_t>(), ev[1]["ts_us"].get<std::int64_t>());
}

TEST_F(CounterAppTest, ResetSavesAndForgetsEveryCounter) {
  ASSERT_EQ(post("/kshard/entities/counter/c1", R"({"op":"increment"})")->status, 200);
  ASSERT_EQ(post("/kshard/entities/counter/c2", R"({"op":"increment","by":2})")->status, 200);
  ASSERT_EQ(app_->activeCounters(), 2u);
  auto r = post("/kshard/reset", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(app_->activeCounters(), 0u) << "a counter stayed active after the reset";
  std::size_t stops = 0;
  for (const auto& e : events()) stops += e["event"] == "stop";
  EXPECT_EQ(stops, 2u);
  // What another pod saved meanwhile is not overwritten by the copy the reset drops: the next
  // activation reads the store.
  ASSERT_TRUE(store_.save("c1", {40, 9}).ok());
  auto again = post("/kshard/entities/counter/c1", R"({"op":"increment"})", 10);
  EXPECT_EQ(json::parse(again->body)["value"], 41);
}

TEST_F(CounterAppTest, AnActivationClaimsTheEpochSoThatTheOldOwnerCannotWriteAnyMore) {
  ASSERT_TRUE(store_.save("c3", {5, 3}).ok());
  // The new owner (epoch 8) activates the counter: the store now says 8 even before it writes.
  ASSERT_EQ(post("/kshard/entities/counter/c3", R"({"op":"get"})", 8)->status, 200);
  EXPECT_EQ(store_.load("c3")->epoch, 8u);
  // The old owner's late write (epoch 3) is refused.
  EXPECT_EQ(store_.save("c3", {6, 3}).code(), StatusCode::kFailedPrecondition);
  // And an activation at an older epoch than the store's is refused too.
  ASSERT_TRUE(store_.save("c4", {1, 9}).ok());
  EXPECT_EQ(post("/kshard/entities/counter/c4", R"({"op":"increment"})", 7)->status, 409);
  EXPECT_EQ(store_.load("c4")->value, 1);
}

TEST_F(CounterAppTest, AfterAResetCallbacksOfOtherSidecarProcessesAreRefused) {
  const auto send = [&](const std::string& target, const std::string& incarnation) {
    return callback(target, incarnation, 0);
  };
  ASSERT_EQ(send("/kshard/entities/counter/c5", "old")->status, 200);
  ASSERT_EQ(send("/kshard/reset", "new")->status, 200);
  // A callback the previous sidecar process sent, still queued when the reset came.
  EXPECT_EQ(send("/kshard/entities/counter/c5", "old")->status, 409);
  EXPECT_EQ(app_->activeCounters(), 0u) << "a stale sidecar's message started a counter";
  EXPECT_EQ(send("/kshard/entities/counter/c5", "new")->status, 200);
}

TEST_F(CounterAppTest, StaleOwnerIsFencedByTheEpoch) {
  ASSERT_EQ(post("/kshard/entities/counter/c2", R"({"op":"get"})", 3)->status, 200);
  ASSERT_TRUE(store_.save("c2", {100, 9}).ok());  // a newer owner wrote meanwhile
  auto r = post("/kshard/entities/counter/c2", R"({"op":"increment"})", 3);
  EXPECT_EQ(r->status, 409);
  EXPECT_EQ(store_.load("c2")->value, 100);
}

// A copy this app kept although its shard went elsewhere (a stop that overtook a late message
// re-activated it) must not be carried on when the shard comes back at a newer epoch: what the
// other owner saved meanwhile is read again.
TEST_F(CounterAppTest, ACopyHeldFromAnOlderEpochIsReadAgainFromTheStore) {
  ASSERT_EQ(post("/kshard/entities/counter/c6", R"({"op":"increment"})", 3)->status, 200);
  ASSERT_TRUE(store_.save("c6", {50, 4}).ok());  // another owner, at epoch 4
  auto r = post("/kshard/entities/counter/c6", R"({"op":"increment"})", 5);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["value"], 51) << "the stale copy went on";
  EXPECT_EQ(store_.load("c6")->value, 51);
  EXPECT_EQ(store_.load("c6")->epoch, 5u);
}

// A message whose answer the sidecar gave up on may reach the app after the entity's stop (on
// another connection): its turn number is not above the stop's, and it is refused instead of
// starting the counter again behind the sidecar's back. So is one older than a handled one.
TEST_F(CounterAppTest, AMessageThatComesAfterItsEntitysStopIsRefused) {
  const auto send = [&](const std::string& target, std::uint64_t turn) {
    return callback(target, "", turn);
  };
  ASSERT_EQ(send("/kshard/entities/counter/c7", 4)->status, 200);
  ASSERT_EQ(send("/kshard/entities/counter/c7/stop", 5)->status, 200);  // turn 5 went missing
  auto late = send("/kshard/entities/counter/c7", 5);
  EXPECT_EQ(late->status, 409) << late->body;
  EXPECT_NE(late->body.find("LateMessage"), std::string::npos) << late->body;
  EXPECT_EQ(app_->activeCounters(), 0u) << "a late message started the counter again";
  EXPECT_EQ(store_.load("c7")->value, 1);
  ASSERT_EQ(send("/kshard/entities/counter/c7", 9)->status, 200);  // a new turn: welcome
  EXPECT_EQ(send("/kshard/entities/counter/c7", 8)->status, 409) << "an older turn was taken";
  EXPECT_EQ(store_.load("c7")->value, 2);
  // A stop the sidecar gave up on, coming after turn 9 was handled, keeps 9 as the bound.
  ASSERT_EQ(send("/kshard/entities/counter/c7/stop", 6)->status, 200);
  EXPECT_EQ(send("/kshard/entities/counter/c7", 7)->status, 409);
  // A reset repeated by the same sidecar process keeps the bounds.
  ASSERT_EQ(send("/kshard/reset", 0)->status, 200);
  EXPECT_EQ(send("/kshard/entities/counter/c7", 9)->status, 409);
  EXPECT_EQ(send("/kshard/entities/counter/c7", 10)->status, 200);
}

// A restarted sidecar numbers its messages from 1 again. The counters the reset stops were
// numbered by the previous process: their turns must not bound the new process's messages, or
// every counter the app held would refuse them as late until the new numbers caught up.
TEST_F(CounterAppTest, TurnsOfThePreviousSidecarProcessDoNotBoundTheNextOnes) {
  const auto send = [&](const std::string& target, const std::string& incarnation,
                        std::uint64_t turn) { return callback(target, incarnation, turn); };
  ASSERT_EQ(send("/kshard/entities/counter/c8", "old", 900)->status, 200);
  ASSERT_EQ(send("/kshard/entities/counter/c9", "old", 901)->status, 200);
  ASSERT_EQ(send("/kshard/entities/counter/c9/stop", "old", 901)->status, 200);
  ASSERT_EQ(send("/kshard/reset", "new", 0)->status, 200);
  ASSERT_EQ(app_->activeCounters(), 0u);
  auto held = send("/kshard/entities/counter/c8", "new", 1);
  EXPECT_EQ(held->status, 200) << "a counter held at the reset: " << held->body;
  auto stopped = send("/kshard/entities/counter/c9", "new", 2);
  EXPECT_EQ(stopped->status, 200) << "a counter stopped before the reset: " << stopped->body;
  EXPECT_EQ(store_.load("c8")->value, 2);
  EXPECT_EQ(store_.load("c9")->value, 2);
  // The new process's own numbers bound its messages as before.
  ASSERT_EQ(send("/kshard/entities/counter/c8/stop", "new", 3)->status, 200);
  EXPECT_EQ(send("/kshard/entities/counter/c8", "new", 3)->status, 409);
}

// The same after a reset of the new process that failed part way (a counter it could not save)
// and was repeated: the counters the first attempt left held keep the old process's numbers,
// which the repeat must not take as bounds either.
TEST_F(CounterAppTest, ARepeatedResetDoesNotTakeThePreviousProcesssTurnsAsBounds) {
  ASSERT_EQ(callback("/kshard/entities/counter/c10", "old", 900)->status, 200);
  const std::string file = dir_ + "/c10.json";
  {
    std::ofstream corrupt(file, std::ios::trunc);
    corrupt << "not json";
  }
  ASSERT_EQ(callback("/kshard/reset", "new", 0)->status, 500) << "the store could save c10";
  ASSERT_EQ(app_->activeCounters(), 1u);
  {
    std::ofstream repaired(file, std::ios::trunc);
    repaired << R"({"value": 1, "epoch": 5})"
             << "\n";
  }
  ASSERT_EQ(callback("/kshard/reset", "new", 0)->status, 200);
  auto r = callback("/kshard/entities/counter/c10", "new", 1);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(store_.load("c10")->value, 2);
}

TEST_F(CounterAppTest, RejectsBadInput) {
  EXPECT_EQ(post("/kshard/entities/counter/c3", "{nope")->status, 400);
  EXPECT_EQ(post("/kshard/entities/counter/c3", R"({"op":"explode"})")->status, 400);
  EXPECT_EQ(post("/kshard/entities/counter/c3", R"({"op":"increment","by":"x"})")->status, 400);
  EXPECT_EQ(post("/kshard/entities/widget/c3", "{}")->status, 404);
}

// A stop names the entity's type: a stop of another type's entity of the same id is answered
// (nothing of that type runs here) and leaves the counter running.
TEST_F(CounterAppTest, AStopOfAnotherTypeLeavesTheCounterOfThatIdRunning) {
  ASSERT_EQ(post("/kshard/entities/counter/c4", R"({"op":"increment"})")->status, 200);
  ASSERT_EQ(post("/kshard/entities/widget/c4/stop", "")->status, 200);
  EXPECT_EQ(app_->activeCounters(), 1u);
  for (const auto& e : events()) EXPECT_NE(e["event"], "stop") << e.dump();
}

TEST_F(CounterAppTest, StopsOfCountersUnderAFaultFailUntilItIsCleared) {
  auto c = clientFor(public_->port());
  const auto fault = [&](http::Method method, const std::string& target) {
    http::Request r;
    r.method = method;
    r.target = target;
    auto res = c->sendSync(std::move(r));
    return res.ok() ? res->status : 0;
  };
  ASSERT_EQ(post("/kshard/entities/counter/stuck-1", R"({"op":"increment"})")->status, 200);
  ASSERT_EQ(post("/kshard/entities/counter/other", R"({"op":"increment"})")->status, 200);
  ASSERT_EQ(fault(http::Method::kPut, "/faults/stop/stuck-"), 200);
  auto refused = post("/kshard/entities/counter/stuck-1/stop", "");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 500);
  EXPECT_EQ(app_->activeCounters(), 2u) << "a failed stop forgot its counter";
  // Counters the prefix does not name stop as always.
  EXPECT_EQ(post("/kshard/entities/counter/other/stop", "")->status, 200);
  // It keeps counting while its stop fails.
  auto more = post("/kshard/entities/counter/stuck-1", R"({"op":"increment"})");
  EXPECT_EQ(json::parse(more->body)["value"], 2);
  ASSERT_EQ(fault(http::Method::kDelete, "/faults/stop/stuck-"), 200);
  EXPECT_EQ(post("/kshard/entities/counter/stuck-1/stop", "")->status, 200);
  EXPECT_EQ(app_->activeCounters(), 0u);
  EXPECT_EQ(store_.load("stuck-1")->value, 2);
  // DELETE /faults/stop clears every prefix.
  ASSERT_EQ(fault(http::Method::kPut, "/faults/stop/a"), 200);
  ASSERT_EQ(fault(http::Method::kPut, "/faults/stop/b"), 200);
  ASSERT_EQ(fault(http::Method::kDelete, "/faults/stop"), 200);
  ASSERT_EQ(post("/kshard/entities/counter/ab", R"({"op":"increment"})")->status, 200);
  EXPECT_EQ(post("/kshard/entities/counter/ab/stop", "")->status, 200);
}

TEST_F(CounterAppTest, PublicApiGoesThroughTheSidecar) {
  auto c = clientFor(public_->port());
  http::Request r;
  r.method = http::Method::kPost;
  r.target = "/counters/user%2F1/increment?by=3";
  auto res = c->sendSync(std::move(r));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(forwarded_, R"(user/1 {"by":3,"op":"increment"})");
}

TEST_F(CounterAppTest, PublicationsAreCountedPerTopicAndLoggedOneLineEach) {
  const auto publication = [&](const std::string& topic) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/kshard/topics/" + topic;
    r.body = "hello";
    r.headers.set("Kshard-Topic", topic);
    r.headers.set("Kshard-Publisher", "pod-b");
    return client_->sendSync(std::move(r));
  };
  ASSERT_EQ(publication("news%2Fa")->status, 200);
  ASSERT_EQ(publication("news%2Fa")->status, 200);
  ASSERT_EQ(publication("b")->status, 200);
  auto c = clientFor(public_->port());
  http::Request get;
  get.target = "/topics";
  auto counts = c->sendSync(std::move(get));
  ASSERT_TRUE(counts.ok());
  ASSERT_EQ(counts->status, 200) << counts->body;
  EXPECT_EQ(json::parse(counts->body),
            (json{{"pod", "pod-a"}, {"topics", {{"news/a", 2}, {"b", 1}}}}));
  std::vector<std::string> logged;
  for (const auto& e : events()) {
    if (e["event"] != "topic") continue;
    EXPECT_EQ(e["pod"], "pod-a");
    EXPECT_EQ(e["publisher"], "pod-b");
    EXPECT_TRUE(e.contains("ts_us"));
    logged.push_back(e["topic"]);
  }
  EXPECT_EQ(logged, (std::vector<std::string>{"news/a", "news/a", "b"}));
  // The counters are untouched.
  EXPECT_EQ(app_->activeCounters(), 0u);
}

TEST_F(CounterAppTest, APublishGoesThroughTheSidecarAndReturnsItsAnswer) {
  auto c = clientFor(public_->port());
  http::Request r;
  r.method = http::Method::kPost;
  r.target = "/topics/news%2Fa/publish?entities=counter";
  r.body = R"({"op":"increment"})";
  auto res = c->sendSync(std::move(r));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["accepted"], 3);
  EXPECT_EQ(forwarded_, R"(/v1/topics/news%2Fa?entities=counter {"op":"increment"})");
}

// A remembered counter started without a message is loaded as by its first message.
TEST_F(CounterAppTest, AStartLoadsTheCounterAsItsFirstMessageWould) {
  ASSERT_TRUE(store_.save("c1", {10, 1}).ok());
  auto r = post("/kshard/entities/counter/c1/start", "");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(app_->activeCounters(), 1u);
  EXPECT_EQ(store_.load("c1")->epoch, 5u) << "the start did not claim the shard's epoch";
  ASSERT_EQ(post("/kshard/entities/counter/c1/start", "")->status, 200);
  auto inc = post("/kshard/entities/counter/c1", R"({"op":"increment"})");
  EXPECT_EQ(json::parse(inc->body)["value"], 11);
  const auto ev = events();
  ASSERT_EQ(ev.size(), 1u) << "a repeated start or the message activated it again";
  EXPECT_EQ(ev[0]["event"], "activate");
  EXPECT_EQ(ev[0]["entity"], "c1");
  EXPECT_EQ(ev[0]["value"], 10);
  EXPECT_EQ(post("/kshard/entities/other/x/start", "")->status, 404);
}

TEST_F(CounterAppTest, ASingletonsStartAndStopAreLoggedOnceEach) {
  auto started = post("/kshard/singletons/ticker/start", "");
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->status, 200) << started->body;
  ASSERT_EQ(post("/kshard/singletons/ticker/start", "")->status, 200);  // a retried start
  auto message = post("/kshard/singletons/ticker", "{}");
  ASSERT_EQ(message->status, 200);
  EXPECT_EQ(json::parse(message->body)["running"], true);
  EXPECT_EQ(json::parse(message->body)["pod"], "pod-a");
  ASSERT_EQ(post("/kshard/singletons/ticker/stop", "")->status, 200);
  ASSERT_EQ(post("/kshard/singletons/ticker/stop", "")->status, 200);
  const auto ev = events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0]["event"], "activate");
  EXPECT_EQ(ev[0]["entity"], "singleton-ticker");
  EXPECT_EQ(ev[0]["shard"], "7");
  EXPECT_EQ(ev[0]["epoch"], 5);
  EXPECT_EQ(ev[1]["event"], "stop");
  EXPECT_EQ(ev[1]["entity"], "singleton-ticker");
}

TEST_F(CounterAppTest, AResetStopsTheSingletons) {
  ASSERT_EQ(post("/kshard/singletons/ticker/start", "")->status, 200);
  ASSERT_EQ(post("/kshard/reset", "")->status, 200);
  const auto ev = events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1]["event"], "stop");
  EXPECT_EQ(ev[1]["entity"], "singleton-ticker");
  EXPECT_EQ(json::parse(post("/kshard/singletons/ticker", "{}")->body)["running"], false);
}

}  // namespace
}  // namespace kshard::examples
