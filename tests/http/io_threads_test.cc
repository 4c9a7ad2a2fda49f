// Beast servers and clients on one shared set of I/O threads: a forward stays on the thread that
// received the message, one thread is enough for a server and a client that call each other, and
// stopping or destroying them in the orders the sidecar and its tests use is safe.
#include "http/io_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "http/beast_client.h"
#include "http/beast_server.h"

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
using Model = IoThreadsOptions::Model;

constexpr milliseconds kWait{10000};  // how long a test waits for something that should happen

Response text(std::string body) {
  Response r;
  r.status = 200;
  r.body = std::move(body);
  return r;
}

Request get(std::string target) {
  Request r;
  r.method = Method::kGet;
  r.target = std::move(target);
  return r;
}

std::unique_ptr<BeastServer> serverOn(IoThreads& io) {
  ServerOptions o;
  o.ioThreads = &io;
  return std::make_unique<BeastServer>(o);
}

std::unique_ptr<Client> clientOn(IoThreads& io, std::uint16_t port) {
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
  o.ioThreads = &io;
  auto c = makeBeastClient(o);
  EXPECT_TRUE(c.ok()) << c.status().toString();
  return std::move(*c);
}

// Keeps Responders unanswered until the test answers them.
struct Stash {
  Handler handler() {
    return [this](Request, Responder r) {
      std::lock_guard<std::mutex> lock(mu);
      held.push_back(std::move(r));
      cv.notify_all();
    };
  }
  bool waitFor(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, kWait, [&] { return held.size() >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Responder> held;
};

class IoThreadsTest : public ::testing::TestWithParam<Model> {
 protected:
  IoThreads io_{IoThreadsOptions{2, GetParam(), std::nullopt}};
};

TEST_P(IoThreadsTest, ServerAndClientOnOneSetServeARequest) {
  auto server = serverOn(io_);
  server->route(Method::kGet, "/ping", [](Request, Responder r) { r.send(text("pong")); });
  ASSERT_TRUE(server->start().ok());
  auto client = clientOn(io_, server->port());
  for (int i = 0; i < 4; ++i) {
    const StatusOr<Response> res = client->sendSync(get("/ping"));
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->body, "pong");
  }
  server->stop();
}

TEST_P(IoThreadsTest, ProxyOnOneThreadForwardsToItsOwnServer) {
  // One thread runs the server, the handler's forward through the client, the inner request and
  // both answers: nothing may wait for another thread.
  IoThreads one(IoThreadsOptions{1, GetParam(), std::nullopt});
  auto server = serverOn(one);
  std::unique_ptr<Client> self;
  server->route(Method::kGet, "/inner", [](Request, Responder r) { r.send(text("inner")); });
  server->route(Method::kGet, "/outer", [&self](Request, Responder r) {
    auto shared = std::make_shared<Responder>(std::move(r));
    self->send(get("/inner"), [shared](StatusOr<Response> res) {
      shared->send(text(res.ok() ? "outer+" + res->body : res.status().toString()));
    });
  });
  ASSERT_TRUE(server->start().ok());
  self = clientOn(one, server->port());
  auto client = clientOn(one, server->port());
  const StatusOr<Response> res = client->sendSync(get("/outer"));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->body, "outer+inner");
  server->stop();
}

TEST(IoThreadsLoopPerThreadTest, ForwardCompletesOnTheThreadThatReceivedTheMessage) {
  IoThreads io(IoThreadsOptions{2, Model::kContextPerThread, std::nullopt});
  auto owner = serverOn(io);
  owner->route(Method::kGet, "/owner", [](Request, Responder r) { r.send(text("owned")); });
  ASSERT_TRUE(owner->start().ok());
  auto toOwner = clientOn(io, owner->port());

  std::mutex mu;
  std::vector<std::string> mismatches;
  auto proxy = serverOn(io);
  proxy->route(Method::kGet, "/proxy", [&](Request, Responder r) {
    const std::thread::id received = std::this_thread::get_id();
    auto shared = std::make_shared<Responder>(std::move(r));
    toOwner->send(get("/owner"), [&, received, shared](StatusOr<Response> res) {
      if (std::this_thread::get_id() != received) {
        std::lock_guard<std::mutex> lock(mu);
        mismatches.push_back("a forward completed on another thread");
      }
      shared->send(text(res.ok() ? res->body : res.status().toString()));
    });
  });
  ASSERT_TRUE(proxy->start().ok());

  // Several connections, so that both loops receive messages.
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(proxy->port());
  o.threads = 2;
  auto load = makeBeastClient(o);
  ASSERT_TRUE(load.ok());
  std::vector<std::future<StatusOr<Response>>> results;
  for (int i = 0; i < 32; ++i) {
    auto p = std::make_shared<std::promise<StatusOr<Response>>>();
    results.push_back(p->get_future());
    (*load)->send(get("/proxy"), [p](StatusOr<Response> res) { p->set_value(std::move(res)); });
  }
  for (auto& f : results) {
    ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
    const StatusOr<Response> res = f.get();
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->body, "owned");
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(mismatches.empty()) << mismatches.size() << " of 32: " << mismatches.front();
  proxy->stop();
  owner->stop();
}

TEST_P(IoThreadsTest, ClientDestructorReturnsAfterTheCallbacksOfAbortedRequests) {
  Stash stash;
  auto server = serverOn(io_);
  server->route(Method::kGet, "/never", stash.handler());
  ASSERT_TRUE(server->start().ok());
  auto client = clientOn(io_, server->port());
  std::atomic<bool> called{false};
  std::optional<StatusCode> code;
  client->send(get("/never"), [&](StatusOr<Response> res) {
    code = res.status().code();
    called = true;
  });
  ASSERT_TRUE(stash.waitFor(1));
  client.reset();
  EXPECT_TRUE(called.load());
  EXPECT_EQ(code, StatusCode::kCancelled);
  server->stop();
}

TEST_P(IoThreadsTest, ClientDestroyedOnOneOfTheThreadsDoesNotWaitForThem) {
  Stash stash;
  auto server = serverOn(io_);
  server->route(Method::kGet, "/never", stash.handler());
  server->route(Method::kGet, "/ping", [](Request, Responder r) { r.send(text("pong")); });
  ASSERT_TRUE(server->start().ok());
  auto doomed = clientOn(io_, server->port());
  std::promise<StatusCode> doomedResult;
  doomed->send(get("/never"),
               [&](StatusOr<Response> res) { doomedResult.set_value(res.status().code()); });
  ASSERT_TRUE(stash.waitFor(1));
  // Another client's callback, on a thread of the set, drops the client with a request in flight.
  auto other = clientOn(io_, server->port());
  std::promise<void> dropped;
  other->send(get("/ping"), [&](StatusOr<Response>) {
    doomed.reset();
    dropped.set_value();
  });
  auto droppedFuture = dropped.get_future();
  ASSERT_EQ(droppedFuture.wait_for(kWait), std::future_status::ready);
  auto result = doomedResult.get_future();
  ASSERT_EQ(result.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(result.get(), StatusCode::kCancelled);
  server->stop();
}

TEST_P(IoThreadsTest, StoppedServerLeavesTheThreadsServingOthersAndFreesItsPort) {
  auto first = serverOn(io_);
  first->route(Method::kGet, "/ping", [](Request, Responder r) { r.send(text("first")); });
  auto second = serverOn(io_);
  second->route(Method::kGet, "/ping", [](Request, Responder r) { r.send(text("second")); });
  ASSERT_TRUE(first->start().ok());
  ASSERT_TRUE(second->start().ok());
  const std::uint16_t port = first->port();
  auto toFirst = clientOn(io_, port);
  ASSERT_TRUE(toFirst->sendSync(get("/ping")).ok());
  first->stop();
  first.reset();

  auto toSecond = clientOn(io_, second->port());
  const StatusOr<Response> res = toSecond->sendSync(get("/ping"));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->body, "second");

  ServerOptions o;
  o.port = port;
  o.ioThreads = &io_;
  BeastServer again(o);
  again.route(Method::kGet, "/ping", [](Request, Responder r) { r.send(text("again")); });
  const Status started = again.start();
  ASSERT_TRUE(started.ok()) << started.toString();
  const StatusOr<Response> fresh = toFirst->sendSync(get("/ping"));
  ASSERT_TRUE(fresh.ok()) << fresh.status().toString();
  EXPECT_EQ(fresh->body, "again");
  again.stop();
  second->stop();
}

TEST_P(IoThreadsTest, ResponderOutlivingItsServerIsHarmless) {
  Stash stash;
  auto server = serverOn(io_);
  server->route(Method::kGet, "/held", stash.handler());
  ASSERT_TRUE(server->start().ok());
  auto client = clientOn(io_, server->port());
  std::promise<StatusOr<Response>> result;
  client->send(get("/held"), [&](StatusOr<Response> res) { result.set_value(std::move(res)); });
  ASSERT_TRUE(stash.waitFor(1));
  server->stop();
  server.reset();
  // The connection was closed: the late answer goes nowhere, and the client saw the close.
  stash.held.front().send(text("late"));
  stash.held.clear();
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_FALSE(f.get().ok());
}

INSTANTIATE_TEST_SUITE_P(Models, IoThreadsTest,
                         ::testing::Values(Model::kContextPerThread, Model::kSharedContext),
                         [](const ::testing::TestParamInfo<Model>& p) {
                           return p.param == Model::kContextPerThread ? "LoopPerThread"
                                                                      : "OneSharedLoop";
                         });

}  // namespace
}  // namespace kshard::http
