// Both adapters (cpprestsdk and Beast), server and client, over real sockets on 127.0.0.1. Every
// test runs once per backend, the client and server of the same backend talking to each other, and
// for Beast also with server and client sharing one set of I/O threads, in both of its models.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "http/beast_server.h"
#include "http/channel_client.h"
#include "http/factory.h"
#include "http/internal/channel_client_core.h"
#include "http/internal/free_port.h"
#include "http/io_threads.h"
#include "tests/http/test_support.h"

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
using testing::RawConnection;

constexpr milliseconds kWait{10000};  // how long a test waits for something that should happen

std::string errorCode(const Response& r) {
  return nlohmann::json::parse(r.body)["error"]["code"].get<std::string>();
}

using testing::textResponse;

// A backend, and for Beast optionally one set of I/O threads that the server and client share,
// and kshard channels (http/channel.h): the server accepts them, the client is a ChannelClient.
struct Setup {
  Backend backend;
  std::optional<IoThreadsOptions::Model> shared;
  bool channels = false;
};

std::string setupName(const ::testing::TestParamInfo<Setup>& p) {
  std::string name(backendName(p.param.backend));
  if (p.param.shared == IoThreadsOptions::Model::kContextPerThread) name += "_sharedLoopPerThread";
  if (p.param.shared == IoThreadsOptions::Model::kSharedContext) name += "_sharedOneLoop";
  if (p.param.channels) name += "_channels";
  return name;
}

class TransportTest : public ::testing::TestWithParam<Setup> {
 protected:
  void SetUp() override {
    if (GetParam().shared) {
      io_ = std::make_unique<IoThreads>(IoThreadsOptions{2, *GetParam().shared, std::nullopt});
    }
  }

  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& r : stashed_) r.send(textResponse("late"));
      stashed_.clear();
    }
    if (server_) server_->stop();
  }

  Server& server(ServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.ioThreads = io_.get();
    options.acceptChannels = GetParam().channels;
    server_ = makeServer(GetParam().backend, std::move(options));
    return *server_;
  }

  void start() {
    const Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.toString();
    ASSERT_NE(server_->port(), 0);
  }

  std::unique_ptr<Client> client(ClientOptions options = {}) {
    if (options.baseUrl.empty()) {
      options.baseUrl = "http://127.0.0.1:" + std::to_string(server_->port());
    }
    options.ioThreads = io_.get();
    if (GetParam().channels) {
      auto c = makeChannelClient(std::move(options));
      EXPECT_TRUE(c.ok()) << c.status().toString();
      return c.ok() ? std::move(*c) : nullptr;
    }
    auto c = makeClient(GetParam().backend, std::move(options));
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static Request get(std::string target) {
    Request r;
    r.method = Method::kGet;
    r.target = std::move(target);
    return r;
  }

  static Request post(std::string target, std::string body) {
    Request r;
    r.method = Method::kPost;
    r.target = std::move(target);
    r.body = std::move(body);
    return r;
  }

  // A handler that keeps its Responder unanswered until the test ends.
  Handler stashing() {
    return [this](Request, Responder r) {
      std::lock_guard<std::mutex> lock(mu_);
      stashed_.push_back(std::move(r));
      cv_.notify_all();
    };
  }

  Handler echo() {
    return [this](Request request, Responder r) {
      ++handled_;
      r.send(textResponse(request.body));
    };
  }

  std::unique_ptr<IoThreads> io_;  // first: outlives the server and clients on it
  std::unique_ptr<Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Responder> stashed_;
  std::atomic<int> handled_{0};
};

TEST_P(TransportTest, RoutesCapturesHeadersQueryAndBodyOverTheWire) {
  server().route(Method::kPost, "/v1/entities/{type}/{id}", [](Request req, Responder r) {
    nlohmann::json body = {{"type", req.param("type")},
                           {"id", req.param("id")},
                           {"mode", req.queryParam("mode").value_or("")},
                           {"tag", req.headers.get("X-Tag").value_or("")},
                           {"body", req.body},
                           {"remote", req.remoteAddress}};
    Response res = Response::json(201, body.dump());
    res.headers.set("X-Reply", "yes");
    r.send(std::move(res));
  });
  start();
  auto c = client();
  Request req = post("/v1/entities/counter/a%2Fb%20c?mode=tell", "hello");
  req.headers.set("X-Tag", "t1");
  const StatusOr<Response> res = c->sendSync(std::move(req));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->headers.get("X-Reply"), "yes");
  EXPECT_EQ(res->headers.get("content-type"), "application/json");
  const auto body = nlohmann::json::parse(res->body);
  EXPECT_EQ(body["type"], "counter");
  EXPECT_EQ(body["id"], "a/b c");
  EXPECT_EQ(body["mode"], "tell");
  EXPECT_EQ(body["tag"], "t1");
  EXPECT_EQ(body["body"], "hello");
  EXPECT_TRUE(body["remote"].get<std::string>().starts_with("127.0.0.1")) << body["remote"];
}

TEST_P(TransportTest, RoutingErrorsAreJson) {
  server().route(Method::kPost, "/v1/drain", echo());
  start();
  auto c = client();
  StatusOr<Response> res = c->sendSync(get("/v1/nothing"));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(errorCode(*res), "NotFound");
  res = c->sendSync(get("/v1/drain"));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(errorCode(*res), "MethodNotAllowed");
  EXPECT_EQ(res->headers.get("Allow"), "POST");
}

TEST_P(TransportTest, MalformedPercentEscapeIs400) {
  server().route(Method::kGet, "/v1/entities/{type}/{id}", echo());
  start();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.send("GET /v1/entities/c/a%zz HTTP/1.1\r\nHost: x\r\n\r\n"));
  // cpprestsdk rejects the URI itself (a plain 400); Beast passes it to the router (a JSON 400).
  const std::string got = raw.readUntil("\r\n\r\n", kWait);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << got;
  EXPECT_EQ(handled_, 0);
}

TEST_P(TransportTest, ContentLengthOverLimitIs413WithoutRunningTheHandler) {
  ServerOptions o;
  o.maxBodyBytes = 1024;
  server(o).route(Method::kPost, "/echo", echo());
  start();
  auto c = client();
  const StatusOr<Response> res = c->sendSync(post("/echo", std::string(4096, 'x')));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(errorCode(*res), "PayloadTooLarge");
  EXPECT_EQ(handled_, 0);
  // A body at the limit still goes through (on a new connection: the 413 closed the old one).
  const StatusOr<Response> ok = c->sendSync(post("/echo", std::string(1024, 'y')));
  ASSERT_TRUE(ok.ok()) << ok.status().toString();
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, std::string(1024, 'y'));
}

// A route that takes less than the server (RouteOptions): refused from the Content-Length, before
// the body is sent at all; chunked bodies as soon as they pass it; other routes keep the server's.
TEST_P(TransportTest, ARoutesOwnBodyLimitIs413BeforeTheBodyIsRead) {
  ServerOptions o;
  o.maxBodyBytes = 4096;
  server(o).route(Method::kPost, "/small", echo(), RouteOptions{.maxBodyBytes = 100});
  server_->route(Method::kPost, "/echo", echo());
  start();
  {
    RawConnection raw(server_->port());
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(raw.send("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n"));
    const std::string got = raw.readUntil("PayloadTooLarge", kWait);
    EXPECT_TRUE(got.starts_with("HTTP/1.1 413")) << got;
    EXPECT_NE(got.find("exceeds 100 bytes"), std::string::npos) << got;
  }
  {
    RawConnection raw(server_->port());
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(
        raw.send("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "40\r\n" +
                 std::string(64, 'a') + "\r\n40\r\n" + std::string(64, 'b') + "\r\n0\r\n\r\n"));
    const std::string got = raw.readUntil("PayloadTooLarge", kWait);
    EXPECT_TRUE(got.starts_with("HTTP/1.1 413")) << got;
  }
  EXPECT_EQ(handled_, 0);
  auto c = client();
  const StatusOr<Response> over = c->sendSync(post("/small", std::string(101, 'x')));
  ASSERT_TRUE(over.ok()) << over.status().toString();
  EXPECT_EQ(over->status, 413);
  EXPECT_EQ(handled_, 0);
  const StatusOr<Response> fits = c->sendSync(post("/small", std::string(100, 'y')));
  ASSERT_TRUE(fits.ok()) << fits.status().toString();
  EXPECT_EQ(fits->status, 200);
  const StatusOr<Response> other = c->sendSync(post("/echo", std::string(4096, 'z')));
  ASSERT_TRUE(other.ok()) << other.status().toString();
  EXPECT_EQ(other->status, 200);
  EXPECT_EQ(other->body.size(), 4096u);
}

// A body the caller keeps (Request::sharedBody) goes out as the body, with its length, and the
// client keeps it alive itself: the caller's reference is gone before the request is sent.
TEST_P(TransportTest, SharedBodyIsSentAsTheBodyAndKeptByTheClient) {
  server().route(Method::kPost, "/echo", echo());
  start();
  auto c = client();
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{100000}}) {
    std::string expected(size, 'q');
    if (size > 0) expected.back() = 'z';
    Request req = post("/echo", "");
    req.body = "ignored when a shared body is set";
    req.sharedBody = std::make_shared<const std::string>(expected);
    std::weak_ptr<const std::string> watch = req.sharedBody;
    const StatusOr<Response> res = c->sendSync(std::move(req));
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->body.size(), size);
    EXPECT_EQ(res->body, expected);
    // Released when the exchange ends, just after its callback.
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(watch.expired()) << "the client still held the body long after the answer";
  }
}

TEST_P(TransportTest, ChunkedBodyOverLimitIs413WithoutRunningTheHandler) {
  ServerOptions o;
  o.maxBodyBytes = 1024;
  server(o).route(Method::kPost, "/echo", echo());
  start();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) request += "200\r\n" + std::string(512, 'z') + "\r\n";
  request += "0\r\n\r\n";
  ASSERT_TRUE(raw.send(request));
  const std::string got = raw.readUntil("PayloadTooLarge", kWait);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 413")) << got;
  EXPECT_EQ(handled_, 0);
}

TEST_P(TransportTest, ChunkedBodyWithinLimitReachesTheHandlerWhole) {
  server().route(Method::kPost, "/echo", echo());
  start();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(
      raw.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"));
  const std::string got = raw.readUntil("abcdefg", kWait);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_NE(got.find("abcdefg"), std::string::npos) << got;
}

TEST_P(TransportTest, PeerSilentMidBodyIsDisconnectedWithoutRunningTheHandler) {
  ServerOptions o;
  o.requestTimeout = milliseconds(200);
  server(o).route(Method::kPost, "/echo", echo());
  start();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  raw.readUntil("", kWait);
  EXPECT_TRUE(raw.closedByPeer()) << "the server kept a silent peer's connection open";
  EXPECT_EQ(handled_, 0);
}

TEST_P(TransportTest, KeepAliveServesSequentialRequestsOnOneConnection) {
  server().route(Method::kGet, "/n/{n}", [](Request req, Responder r) {
    r.send(textResponse("n=" + std::string(req.param("n"))));
  });
  start();
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.send("GET /n/1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(raw.readUntil("n=1", kWait).find("n=1"), std::string::npos);
  ASSERT_TRUE(raw.send("GET /n/2 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(raw.readUntil("n=2", kWait).find("n=2"), std::string::npos);
  EXPECT_FALSE(raw.closedByPeer());
}

TEST_P(TransportTest, ClientReusesItsConnection) {
  // The server is Beast whatever the parameter, for its accepted-connection count.
  ServerOptions o;
  o.acceptChannels = GetParam().channels;
  BeastServer beast(o);
  beast.route(Method::kGet, "/ping", [](Request, Responder r) { r.send(textResponse("pong")); });
  ASSERT_TRUE(beast.start().ok());
  ClientOptions co;
  co.baseUrl = "http://127.0.0.1:" + std::to_string(beast.port());
  auto c = client(co);
  constexpr int kRequests = 10;
  for (int i = 0; i < kRequests; ++i) {
    const StatusOr<Response> res = c->sendSync(get("/ping"));
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->body, "pong");
  }
  if (GetParam().channels) {
    // One channel per loop of the client's threads (the requests come from a thread of neither
    // loop, so they take the loops in turn); each is one connection.
    EXPECT_GE(beast.connectionsAccepted(), 1u);
    EXPECT_LE(beast.connectionsAccepted(), io_ ? 2u : 1u);
    EXPECT_EQ(beast.connectionsAccepted(),
              dynamic_cast<ChannelClient&>(*c).core().channelsOpened());
  } else if (GetParam().backend == Backend::kBeast) {
    EXPECT_EQ(beast.connectionsAccepted(), 1u);
  } else {
    // cpprestsdk returns a connection to its pool only when its request context is destroyed,
    // which may come after our callback: the next request then opens another.
    EXPECT_LT(beast.connectionsAccepted(), static_cast<std::uint64_t>(kRequests));
  }
  beast.stop();
}

TEST_P(TransportTest, ConcurrentRequestsAllComplete) {
  server().route(Method::kPost, "/echo", echo());
  start();
  auto c = client();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 16;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::string> failures;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        c->send(post("/echo", id), [&, id](StatusOr<Response> res) {
          std::lock_guard<std::mutex> lock(mu);
          if (!res.ok()) {
            failures.push_back(id + ": " + res.status().toString());
          } else if (res->status != 200 || res->body != id) {
            failures.push_back(id + ": got " + std::to_string(res->status) + " " + res->body);
          }
          ++done;
          cv.notify_all();
        });
      }
    });
  }
  for (auto& s : senders) s.join();
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return done == kThreads * kPerThread; }))
      << "only " << done << " of " << kThreads * kPerThread << " requests completed";
  EXPECT_TRUE(failures.empty()) << failures.front();
}

TEST_P(TransportTest, ResponderMayAnswerFromAnotherThread) {
  std::thread::id handlerThread;
  std::thread::id answerThread;
  server().route(Method::kGet, "/later", [&, this](Request, Responder r) {
    std::lock_guard<std::mutex> lock(mu_);
    handlerThread = std::this_thread::get_id();
    stashed_.push_back(std::move(r));
    cv_.notify_all();
  });
  start();
  // The answering thread belongs to the test, not to the handler: it must be joined here, and a
  // thread the handler started could still be on its way into a vector when the answer arrives.
  std::thread answerer([&, this] {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kWait, [this] { return !stashed_.empty(); })) return;
    Responder r = std::move(stashed_.back());
    stashed_.pop_back();
    answerThread = std::this_thread::get_id();
    lock.unlock();
    r.send(textResponse("from elsewhere"));
  });
  const std::thread::id answererId = answerer.get_id();
  auto c = client();
  const StatusOr<Response> res = c->sendSync(get("/later"));
  answerer.join();
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->body, "from elsewhere");
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(answerThread, answererId);
  EXPECT_NE(handlerThread, answererId);
}

// One body answered to many requests (the map's changes to every sidecar) is written from where
// it is, on both servers.
TEST_P(TransportTest, ASharedBodyIsSentToEveryRequest) {
  auto shared = std::make_shared<const std::string>(std::string(100000, 'x') + "{}");
  server().route(Method::kGet, "/shared",
                 [shared](Request, Responder r) { r.send(Response::json(200, shared)); });
  start();
  auto c = client();
  for (int i = 0; i < 3; ++i) {
    const StatusOr<Response> res = c->sendSync(get("/shared"));
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, *shared);
    EXPECT_EQ(res->headers.get("Content-Type").value_or(""), "application/json");
  }
}

TEST_P(TransportTest, UnansweredResponderIs500) {
  server().route(Method::kGet, "/drop", [](Request, Responder) {});
  start();
  auto c = client();
  const StatusOr<Response> res = c->sendSync(get("/drop"));
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(errorCode(*res), "Internal");
  EXPECT_EQ(nlohmann::json::parse(res->body)["error"]["message"], "handler did not answer");
}

TEST_P(TransportTest, ServerThatNeverAnswersIsDeadlineExceeded) {
  server().route(Method::kGet, "/never", stashing());
  start();
  auto c = client();
  Request req = get("/never");
  req.timeout = milliseconds(300);
  const auto before = std::chrono::steady_clock::now();
  const StatusOr<Response> res = c->sendSync(std::move(req));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kDeadlineExceeded) << res.status().toString();
  EXPECT_LT(std::chrono::steady_clock::now() - before, kWait);
}

TEST_P(TransportTest, ConnectionRefusedIsUnavailable) {
  const StatusOr<std::uint16_t> port = pickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok());
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(*port);
  auto c = client(o);
  ASSERT_NE(c, nullptr);
  const StatusOr<Response> res = c->sendSync(get("/"));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable) << res.status().toString();
  EXPECT_NE(res.status().message().find(std::to_string(*port)), std::string::npos)
      << res.status().toString();
}

TEST_P(TransportTest, ResponseOverMaxResponseBytesIsResourceExhausted) {
  server().route(Method::kGet, "/big",
                 [](Request, Responder r) { r.send(textResponse(std::string(10000, 'b'))); });
  start();
  ClientOptions o;
  o.maxResponseBytes = 1000;
  auto c = client(o);
  const StatusOr<Response> res = c->sendSync(get("/big"));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kResourceExhausted) << res.status().toString();
}

TEST_P(TransportTest, ChunkedResponseOverMaxResponseBytesIsResourceExhausted) {
  const bool channels = GetParam().channels;
  server().route(Method::kGet, "/big", [channels](Request, Responder r) {
    auto writer = r.startStream(200, {});
    if (channels) {
      // A channel carries whole answers only: the handler is told, and its Responder, dropped
      // unanswered, answers 500.
      EXPECT_EQ(writer.status().code(), StatusCode::kFailedPrecondition);
      return;
    }
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 4; ++i) (*writer)->write(std::string(500, 'c'));
    (*writer)->finish();
  });
  start();
  ClientOptions o;
  o.maxResponseBytes = 1000;
  auto c = client(o);
  const StatusOr<Response> res = c->sendSync(get("/big"));
  if (channels) {
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->status, 500);
    return;
  }
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kResourceExhausted) << res.status().toString();
}

TEST_P(TransportTest, MalformedBaseUrlIsRejected) {
  ClientOptions o;
  o.baseUrl = "ftp://127.0.0.1:1";
  EXPECT_EQ(makeClient(GetParam().backend, o).status().code(), StatusCode::kInvalidArgument);
  o.baseUrl = "http://127.0.0.1:1/path";
  EXPECT_EQ(makeClient(GetParam().backend, o).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(TransportTest, StopWaitsForHandlersInFlightUpToGrace) {
  server().route(Method::kGet, "/slow", stashing());
  start();
  auto c = client();
  std::promise<StatusOr<Response>> result;
  c->send(get("/slow"), [&](StatusOr<Response> r) { result.set_value(std::move(r)); });
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, kWait, [this] { return !stashed_.empty(); }))
        << "the handler never ran";
  }
  std::thread stopper([this] { server_->stop(std::chrono::seconds(30)); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    stashed_.front().send(textResponse("finished"));
    stashed_.clear();
  }
  stopper.join();
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  const StatusOr<Response> res = f.get();
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->body, "finished");
}

INSTANTIATE_TEST_SUITE_P(
    Backends, TransportTest,
    ::testing::Values(Setup{Backend::kCppRest, std::nullopt}, Setup{Backend::kBeast, std::nullopt},
                      Setup{Backend::kBeast, IoThreadsOptions::Model::kContextPerThread},
                      Setup{Backend::kBeast, IoThreadsOptions::Model::kSharedContext},
                      Setup{Backend::kBeast, std::nullopt, true},
                      Setup{Backend::kBeast, IoThreadsOptions::Model::kContextPerThread, true},
                      Setup{Backend::kBeast, IoThreadsOptions::Model::kSharedContext, true}),
    setupName);

// cpprestsdk's listener drops pipelined requests and never times out a peer that sends nothing,
// so these pin Beast only.
TEST(BeastServerTest, PipelinedRequestsAreAnsweredInOrder) {
  BeastServer server(ServerOptions{});
  server.route(Method::kGet, "/n/{n}", [](Request req, Responder r) {
    r.send(textResponse("n=" + std::string(req.param("n")) + ";"));
  });
  ASSERT_TRUE(server.start().ok());
  RawConnection raw(server.port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(
      raw.send("GET /n/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /n/2 HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /n/3 HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string got = raw.readUntil("n=3;", kWait);
  const auto p1 = got.find("n=1;");
  const auto p2 = got.find("n=2;");
  const auto p3 = got.find("n=3;");
  ASSERT_NE(p3, std::string::npos) << got;
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, p3);
  server.stop();
}

// A connect that times out sent nothing, so it is Unavailable (the router then tries the shard's
// next owner) and not DeadlineExceeded (which means "sent, maybe processed"). Found end to end: a
// pod killed with its network gone drops SYNs, and a message for one of its shards failed with
// 504 at once although the shard had a new owner a moment later.
TEST(BeastClientTest, ConnectTimeoutIsUnavailableBecauseNothingWasSent) {
  // A listener that never accepts, its queue filled: the kernel drops further SYNs.
  sockaddr_in addr{};
  const int listener = testing::listenOnLoopback(0, addr);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    fillers.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    (void)::connect(fillers.back(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  o.connectTimeout = milliseconds(200);
  auto c = makeClient(Backend::kBeast, o);
  ASSERT_TRUE(c.ok());
  Request req;
  req.method = Method::kPost;
  req.target = "/v1/peer/entities/counter/a";
  req.body = "{}";
  req.timeout = std::chrono::seconds(20);
  const auto before = std::chrono::steady_clock::now();
  const StatusOr<Response> res = (*c)->sendSync(std::move(req));
  const auto took = std::chrono::steady_clock::now() - before;
  for (int f : fillers) ::close(f);
  ::close(listener);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable) << res.status().toString();
  EXPECT_NE(res.status().message().find("connecting: no connection within 200 ms"),
            std::string::npos)
      << res.status().toString();
  EXPECT_LT(took, std::chrono::seconds(10)) << "the connect timeout was not applied";
}

TEST(BeastServerTest, PeerThatSendsNothingIsDisconnected) {
  ServerOptions o;
  o.requestTimeout = milliseconds(200);
  BeastServer server(o);
  ASSERT_TRUE(server.start().ok());
  RawConnection raw(server.port());
  ASSERT_TRUE(raw.connected());
  raw.readUntil("", kWait);
  EXPECT_TRUE(raw.closedByPeer()) << "the server kept an idle connection past requestTimeout";
  server.stop();
}

TEST(BeastServerTest, ExpectContinueGetsInterimResponse) {
  BeastServer server(ServerOptions{});
  server.route(Method::kPost, "/echo",
               [](Request req, Responder r) { r.send(textResponse(req.body)); });
  ASSERT_TRUE(server.start().ok());
  RawConnection raw(server.port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(
      raw.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
               "Expect: 100-continue\r\n\r\n"));
  EXPECT_TRUE(raw.readUntil("\r\n\r\n", kWait).starts_with("HTTP/1.1 100"));
  ASSERT_TRUE(raw.send("hello"));
  EXPECT_NE(raw.readUntil("hello", kWait).find("HTTP/1.1 200"), std::string::npos);
  server.stop();
}

}  // namespace
}  // namespace kshard::http
