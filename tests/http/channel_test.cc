// kshard channels (http/channel.h): the frame codec, and the Beast server and ChannelClient over
// real sockets on 127.0.0.1, including a scripted server that sends what ours would not (goaway
// mid-burst, malformed frames). The transport suite (transport_test.cc) runs over channels too.
#include "http/channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "http/beast_server.h"
#include "http/channel_client.h"
#include "http/factory.h"
#include "http/internal/channel_client_core.h"
#include "tests/http/test_support.h"

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
using testing::textResponse;

constexpr milliseconds kWait{10000};  // how long a test waits for something that should happen

// Waits (up to kWait) until the client has no channel open: a channel ends on its own loop, a
// moment after the answers that ended it were delivered.
bool channelsClosed(ChannelClient& client) {
  const auto giveUp = std::chrono::steady_clock::now() + kWait;
  while (client.core().openChannels() != 0 && std::chrono::steady_clock::now() < giveUp) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  return client.core().openChannels() == 0;
}

// --- the codec -----------------------------------------------------------------------------

struct Decoded {
  channel::FrameHead head;
  std::string payload;
};

Decoded decode(const std::string& frame) {
  Decoded d;
  std::string error;
  EXPECT_GE(frame.size(), channel::kHeadBytes);
  EXPECT_TRUE(channel::parseHead(frame, d.head, error)) << error;
  EXPECT_EQ(frame.size(), channel::kHeadBytes + d.head.payloadBytes);
  d.payload = frame.substr(channel::kHeadBytes);
  return d;
}

TEST(ChannelFrameTest, ARequestComesBackAsItWasSent) {
  Headers fields;
  fields.add("X-Kshard-Epoch", "7");
  fields.add("Content-Type", "application/json");
  std::string out = "already there";
  channel::appendRequest(out, 42, Method::kPost, "/v1/peer/entities/counter/a%2Fb?mode=tell",
                         fields, std::string(3000, 'x'));
  const Decoded d = decode(out.substr(13));
  EXPECT_EQ(out.substr(0, 13), "already there");
  EXPECT_EQ(d.head.type, channel::FrameType::kRequest);
  EXPECT_EQ(d.head.id, 42u);
  Request r;
  std::string error;
  ASSERT_TRUE(channel::parseRequest(d.payload, r, error)) << error;
  EXPECT_EQ(r.method, Method::kPost);
  EXPECT_EQ(r.target, "/v1/peer/entities/counter/a%2Fb?mode=tell");
  EXPECT_EQ(r.headers.wire(), fields.wire());
  EXPECT_EQ(r.headers.get("x-kshard-epoch"), "7");
  EXPECT_EQ(r.body, std::string(3000, 'x'));
}

TEST(ChannelFrameTest, AResponseAndAGoawayComeBackAsTheyWereSent) {
  Headers fields;
  fields.add("X-Kshard-Error", "EntityNotManagedByThisPod");
  std::string out;
  channel::appendResponse(out, 0xfedcba9876543210ull, 409, fields, "{}");
  const Decoded d = decode(out);
  EXPECT_EQ(d.head.type, channel::FrameType::kResponse);
  EXPECT_EQ(d.head.id, 0xfedcba9876543210ull);
  Response r;
  std::string error;
  ASSERT_TRUE(channel::parseResponse(d.payload, r, error)) << error;
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.headers.get("x-kshard-error"), "EntityNotManagedByThisPod");
  EXPECT_EQ(r.body, "{}");

  std::string goaway;
  channel::appendGoaway(goaway, 17);
  const Decoded g = decode(goaway);
  EXPECT_EQ(g.head.type, channel::FrameType::kGoaway);
  EXPECT_EQ(g.head.id, 17u);
  EXPECT_EQ(g.head.payloadBytes, 0u);
}

// A request payload: method, target, fields and body, each as given (lengths included).
std::string requestPayload(unsigned method, std::string_view target, std::string_view fields,
                           std::string_view body = "") {
  auto u32 = [](std::size_t n) {
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  };
  return std::string(1, static_cast<char>(method)) + u32(target.size()) + std::string(target) +
         u32(fields.size()) + std::string(fields) + std::string(body);
}

std::string requestError(const std::string& payload) {
  Request r;
  std::string error;
  EXPECT_FALSE(channel::parseRequest(payload, r, error));
  return error;
}

TEST(ChannelFrameTest, MalformedRequestsAreRefusedWithTheirReason) {
  const unsigned post = static_cast<unsigned>(Method::kPost);
  EXPECT_EQ(requestError(requestPayload(post, "/a", "X: 1\r\n").substr(0, 7)),
            "request frame ends inside its head");
  EXPECT_EQ(requestError(requestPayload(99, "/a", "")), "unknown method 99");
  EXPECT_EQ(requestError(requestPayload(post, "a", "")), "the target is not a path");
  EXPECT_EQ(requestError(requestPayload(post, "/a b", "")),
            "the target holds a space or control character");
  EXPECT_EQ(requestError(requestPayload(post, "/a", "X 1\r\n")),
            "field 1 is not one \"Name: value\" line");
  EXPECT_EQ(requestError(requestPayload(post, "/a", "X: 1\r\nY: 2\n")),
            "field 2 is not one \"Name: value\" line");
  EXPECT_EQ(requestError(requestPayload(post, "/a", "X: 1")),
            "field 1 is not one \"Name: value\" line");
  EXPECT_EQ(requestError(requestPayload(post, "/a", std::string("X: a\0b\r\n", 8))),
            "field 1 has a character no field may hold");
  EXPECT_EQ(requestError(requestPayload(post, "/a", "Content-Length: 5\r\n")),
            "a frame's fields hold no Content-Length or Transfer-Encoding");
  EXPECT_EQ(requestError(requestPayload(post, "/a", std::string(70000, 'x'))),
            "target and fields exceed 65536 bytes");
  // And one that is well-formed, for contrast.
  Request r;
  std::string error;
  EXPECT_TRUE(channel::parseRequest(requestPayload(post, "/a", "X: 1\r\n", "b"), r, error))
      << error;
}

TEST(ChannelFrameTest, MalformedHeadsAndResponsesAreRefused) {
  channel::FrameHead head;
  std::string error;
  EXPECT_FALSE(channel::parseHead(std::string("\0\0\0\x09\x07"
                                              "12345678",
                                              13),
                                  head, error));
  EXPECT_EQ(error, "unknown frame type 7");
  EXPECT_FALSE(channel::parseHead(std::string("\0\0\0\x05\x01"
                                              "12345678",
                                              13),
                                  head, error));
  EXPECT_EQ(error, "frame length 5 is shorter than its head");
  EXPECT_FALSE(channel::parseHead(std::string("\0\0\0\x0a\x03"
                                              "12345678",
                                              13),
                                  head, error));
  EXPECT_EQ(error, "a goaway frame has no payload");

  Response r;
  EXPECT_FALSE(channel::parseResponse(std::string("\0\x2a\0\0\0\0", 6), r, error));
  EXPECT_EQ(error, "status 42 is out of range");
  EXPECT_FALSE(channel::parseResponse(std::string("\0\xc8\0\0\0\x09"
                                                  "X: 1\r\n",
                                                  13),
                                      r, error));
  EXPECT_EQ(error, "response frame ends inside its head");
}

TEST(ChannelFrameTest, TheBodyAFrameMustCarryIsKnownFromItsLengthAlone) {
  EXPECT_EQ(channel::minBodyBytes(100), 0u);
  EXPECT_EQ(channel::minBodyBytes(9 + channel::kMaxFieldsBytes + 5), 5u);
}

// --- over sockets --------------------------------------------------------------------------

Request post(std::string target, std::string body, milliseconds timeout = milliseconds(0)) {
  Request r;
  r.method = Method::kPost;
  r.target = std::move(target);
  r.body = std::move(body);
  r.timeout = timeout;
  return r;
}

std::unique_ptr<ChannelClient> channelClient(std::uint16_t port, ClientOptions o = {}) {
  o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
  auto c = makeChannelClient(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().toString();
  return c.ok() ? std::unique_ptr<ChannelClient>(static_cast<ChannelClient*>(c->release()))
                : nullptr;
}

// Handlers that keep their Responders until the test answers them.
class Stash {
 public:
  Handler handler() {
    return [this](Request request, Responder r) {
      std::lock_guard lock(mu_);
      held_.emplace_back(std::string(request.param("n")), std::move(r));
      cv_.notify_all();
    };
  }
  // Waits until `n` are held; false when they did not come within kWait.
  bool waitFor(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return held_.size() >= n; });
  }
  std::vector<std::pair<std::string, Responder>> take() {
    std::lock_guard lock(mu_);
    return std::move(held_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, Responder>> held_;
};

// Collects the callbacks' results by request.
class Results {
 public:
  ResponseCallback callback(std::string key) {
    return [this, key = std::move(key)](StatusOr<Response>&& r) {
      std::lock_guard lock(mu_);
      got_.emplace_back(key, std::move(r));
      cv_.notify_all();
    };
  }
  bool waitFor(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return got_.size() >= n; });
  }
  std::vector<std::pair<std::string, StatusOr<Response>>> get() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, StatusOr<Response>>> got_;
};

// A Beast server that accepts channels, with /echo (answers the body) and /slow/{n} (held in
// `stash`); more routes may be added before start().
struct ChannelServer {
  static ServerOptions withChannels(ServerOptions o) {
    o.acceptChannels = true;
    return o;
  }
  explicit ChannelServer(ServerOptions o = {}) : server(withChannels(std::move(o))) {
    server.route(Method::kPost, "/echo",
                 [](Request request, Responder r) { r.send(textResponse(request.body)); });
    server.route(Method::kPost, "/slow/{n}", stash.handler());
  }
  ~ChannelServer() { server.stop(); }
  bool start() { return server.start().ok(); }
  std::uint16_t port() const { return server.port(); }

  Stash stash;  // first: outlives the server's handlers
  BeastServer server;
};

TEST(ChannelTest, ManyRequestsShareOneConnectionAndAnswersComeInAnyOrder) {
  ChannelServer s;
  ASSERT_TRUE(s.start());
  ClientOptions co;
  co.threads = 1;  // one loop: one channel
  auto client = channelClient(s.server.port(), co);
  Results results;
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    client->send(post("/slow/" + std::to_string(i), "body " + std::to_string(i)),
                 results.callback(std::to_string(i)));
  }
  ASSERT_TRUE(s.stash.waitFor(kRequests)) << "the handlers did not receive every request";
  auto held = s.stash.take();
  // The last first: every answer still finds its own request.
  for (auto it = held.rbegin(); it != held.rend(); ++it)
    it->second.send(textResponse("n=" + it->first));
  ASSERT_TRUE(results.waitFor(kRequests)) << "not every request was answered";
  const auto got = results.get();
  for (const auto& [key, r] : got) {
    ASSERT_TRUE(r.ok()) << key << ": " << r.status().toString();
    EXPECT_EQ(r->body, "n=" + key);
  }
  EXPECT_EQ(got.front().first, std::to_string(kRequests - 1));
  EXPECT_EQ(s.server.connectionsAccepted(), 1u);
  EXPECT_EQ(client->core().channelsOpened(), 1u);
  EXPECT_TRUE(client->core().usesChannels());
}

TEST(ChannelTest, AServerThatDoesNotSpeakChannelsGetsPlainHttp) {
  for (const Backend backend : {Backend::kBeast, Backend::kCppRest}) {
    SCOPED_TRACE(std::string(backendName(backend)));
    ServerOptions o;  // channels not accepted: the upgrade is answered 404
    auto server = makeServer(backend, o);
    server->route(Method::kPost, "/echo/{n}",
                  [](Request request, Responder r) { r.send(textResponse(request.body)); });
    ASSERT_TRUE(server->start().ok());
    auto client = channelClient(server->port());
    for (int i = 0; i < 3; ++i) {
      const auto r = client->sendSync(post("/echo/1", "hello " + std::to_string(i)));
      ASSERT_TRUE(r.ok()) << r.status().toString();
      EXPECT_EQ(r->body, "hello " + std::to_string(i));
    }
    EXPECT_FALSE(client->core().usesChannels());
    EXPECT_EQ(client->core().channelsOpened(), 0u);
    server->stop();
  }
}

TEST(ChannelTest, ALateAnswerIsDroppedAndTheChannelGoesOn) {
  ChannelServer s;
  ASSERT_TRUE(s.start());
  ClientOptions co;
  co.threads = 1;
  auto client = channelClient(s.server.port(), co);
  const auto late = client->sendSync(post("/slow/1", "", milliseconds(100)));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().toString();
  ASSERT_TRUE(s.stash.waitFor(1));
  for (auto& [n, r] : s.stash.take()) r.send(textResponse("too late"));
  const auto next = client->sendSync(post("/echo", "next"));
  ASSERT_TRUE(next.ok()) << next.status().toString();
  EXPECT_EQ(next->body, "next");
  EXPECT_EQ(client->core().channelsOpened(), 1u);
}

TEST(ChannelTest, BodiesOverEitherLimitFailThatRequestOnlyAndTheChannelGoesOn) {
  ServerOptions o;
  o.maxBodyBytes = 1000;
  ChannelServer s(o);
  s.server.route(Method::kPost, "/big",
                 [](Request, Responder r) { r.send(textResponse(std::string(3000, 'b'))); });
  ASSERT_TRUE(s.start());
  ClientOptions co;
  co.threads = 1;
  co.maxResponseBytes = 2000;
  auto client = channelClient(s.server.port(), co);
  // Over the server's limit by more than any frame's fields could take: refused from the head.
  const auto huge = client->sendSync(post("/echo", std::string(100000, 'x')));
  ASSERT_TRUE(huge.ok()) << huge.status().toString();
  EXPECT_EQ(huge->status, 413);
  // Over it by a little: refused once the frame is read.
  const auto over = client->sendSync(post("/echo", std::string(1001, 'x')));
  ASSERT_TRUE(over.ok()) << over.status().toString();
  EXPECT_EQ(over->status, 413);
  const auto big = client->sendSync(post("/big", ""));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted) << big.status().toString();
  const auto fine = client->sendSync(post("/echo", std::string(1000, 'y')));
  ASSERT_TRUE(fine.ok()) << fine.status().toString();
  EXPECT_EQ(fine->status, 200);
  EXPECT_EQ(fine->body, std::string(1000, 'y'));
  EXPECT_EQ(s.server.connectionsAccepted(), 1u);
}

TEST(ChannelTest, StopAnswersWhatTheServerTookAndTheClientThenFindsItGone) {
  ChannelServer s;
  ASSERT_TRUE(s.start());
  const std::uint16_t port = s.server.port();
  ClientOptions co;
  co.threads = 1;
  auto client = channelClient(port, co);
  Results results;
  for (int i = 0; i < 3; ++i) {
    client->send(post("/slow/" + std::to_string(i), ""), results.callback(std::to_string(i)));
  }
  ASSERT_TRUE(s.stash.waitFor(3));
  // stop() sends goaway and waits for the answers to what the server took.
  auto stopped = std::async(std::launch::async, [&s] { s.server.stop(kWait); });
  for (auto& [n, r] : s.stash.take()) r.send(textResponse("n=" + n));
  ASSERT_TRUE(results.waitFor(3));
  for (const auto& [key, r] : results.get()) {
    ASSERT_TRUE(r.ok()) << key << ": " << r.status().toString();
    EXPECT_EQ(r->body, "n=" + key);
  }
  stopped.get();
  // The channel ended with the goaway; a new one cannot connect.
  const auto after = client->sendSync(post("/slow/9", ""));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << after.status().toString();
  EXPECT_EQ(client->core().openChannels(), 0u);
}

// A graceful stop must not cut a request the client has sent on an idle channel: the server's
// goaway (which names the last request it took) has to reach the client before the connection
// closes, or the client cannot know whether the request was applied (OutcomeUnknown). The
// server's only loop is held busy (by a handler of another server on the same thread) while
// stop() begins and the request arrives, so that what stop() posts and what the client sent are
// waiting together when the loop runs again: the order a loaded machine produces now and then.
TEST(ChannelTest, AGracefulStopSendsGoawayBeforeItClosesAnIdleChannel) {
  IoThreads io(IoThreadsOptions{1, IoThreadsOptions::Model::kContextPerThread, std::nullopt});
  ServerOptions o;
  o.ioThreads = &io;
  ChannelServer s(o);
  ASSERT_TRUE(s.start());
  // The other server, on the same loop: its handler holds the loop until released.
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ServerOptions bo;
  bo.ioThreads = &io;
  BeastServer blocker(bo);
  blocker.route(Method::kGet, "/block", [&entered, released](Request, Responder r) {
    entered.set_value();
    released.wait();
    r.send(textResponse("released"));
  });
  ASSERT_TRUE(blocker.start().ok());

  Results results;  // before the client, whose callbacks use it
  ClientOptions co;
  co.threads = 1;  // one loop of its own: one channel
  auto client = channelClient(s.server.port(), co);
  ASSERT_TRUE(client->sendSync(post("/echo", "open")).ok());  // the channel is open, and idle

  testing::RawConnection hold(blocker.port());
  ASSERT_TRUE(hold.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  entered.get_future().wait();
  // The server is not busy: stop() goes on to close the channel, after asking it to go away.
  const auto stopStarted = std::chrono::steady_clock::now();
  auto stopped = std::async(std::launch::async, [&s] { s.server.stop(kWait); });
  client->send(post("/echo", "during the stop"), results.callback("late"));
  // Long enough for stop() to post what it posts and for the request to reach the server's socket.
  std::this_thread::sleep_for(milliseconds(300));
  release.set_value();

  ASSERT_TRUE(results.waitFor(1));
  const auto got = results.get();
  const StatusOr<Response>& r = got[0].second;
  // Taken and answered, or named by the goaway as not taken; never cut without a word.
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().toString();
    EXPECT_NE(r.status().message().find("did not take the request"), std::string::npos)
        << r.status().toString();
  } else {
    EXPECT_EQ(r->body, "during the stop");
  }
  stopped.get();
  // The client closed on the goaway: the stop did not need its whole grace.
  EXPECT_LT(std::chrono::steady_clock::now() - stopStarted, kWait / 2);
  EXPECT_TRUE(channelsClosed(*client));
  blocker.stop();
}

TEST(ChannelTest, IdleChannelsCloseFromEitherSideAndTheNextRequestOpensAnother) {
  for (const bool serverSide : {false, true}) {
    SCOPED_TRACE(serverSide ? "the server's idle timeout" : "the client's idle timeout");
    ServerOptions o;
    o.requestTimeout = serverSide ? milliseconds(200) : std::chrono::seconds(30);
    ChannelServer s(o);
    ASSERT_TRUE(s.start());
    ClientOptions co;
    co.threads = 1;
    co.idleTimeout = serverSide ? std::chrono::seconds(30) : milliseconds(200);
    auto client = channelClient(s.server.port(), co);
    ASSERT_TRUE(client->sendSync(post("/echo", "1")).ok());
    EXPECT_EQ(client->core().openChannels(), 1u);
    ASSERT_TRUE(channelsClosed(*client)) << "the idle channel was not closed";
    const auto again = client->sendSync(post("/echo", "2"));
    ASSERT_TRUE(again.ok()) << again.status().toString();
    EXPECT_EQ(again->body, "2");
    EXPECT_EQ(client->core().channelsOpened(), 2u);
    EXPECT_EQ(s.server.connectionsAccepted(), 2u);
  }
}

TEST(ChannelTest, DestroyingTheClientCancelsWhatIsInFlight) {
  ChannelServer s;
  ASSERT_TRUE(s.start());
  Results results;
  {
    auto client = channelClient(s.server.port());
    client->send(post("/slow/1", ""), results.callback("1"));
    ASSERT_TRUE(s.stash.waitFor(1));
  }
  const auto got = results.get();
  ASSERT_EQ(got.size(), 1u) << "the callback had not run when the client was gone";
  EXPECT_EQ(got[0].second.status().code(), StatusCode::kCancelled);
  for (auto& [n, r] : s.stash.take()) r.send(textResponse("nobody listens"));
}

// A server of the test's own: it accepts one connection, answers the upgrade with 101, and hands
// what the client sends to `script`, which answers with raw bytes.
class ScriptedChannelServer {
 public:
  // `script(frames so far)` returns bytes to send once the client sent `frames` request frames.
  using Script = std::function<std::string(const std::vector<channel::FrameHead>& frames)>;

  ScriptedChannelServer(std::size_t framesBeforeAnswering, Script script,
                        std::string upgradeAnswer =
                            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                            "Upgrade: kshard-channel/1\r\n\r\n") {
    sockaddr_in addr{};
    listener_ = testing::listenOnLoopback(4, addr);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, framesBeforeAnswering, script = std::move(script),
                           upgradeAnswer = std::move(upgradeAnswer)] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::string in;
      char buf[4096];
      auto readMore = [&] {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return false;
        in.append(buf, static_cast<std::size_t>(n));
        return true;
      };
      while (in.find("\r\n\r\n") == std::string::npos) {
        if (!readMore()) break;
      }
      in.erase(0, in.find("\r\n\r\n") + 4);
      testing::sendAll(fd, upgradeAnswer);
      std::vector<channel::FrameHead> frames;
      while (frames.size() < framesBeforeAnswering) {
        channel::FrameHead head;
        std::string error;
        if (in.size() >= channel::kHeadBytes && channel::parseHead(in, head, error) &&
            in.size() >= channel::kHeadBytes + head.payloadBytes) {
          in.erase(0, channel::kHeadBytes + head.payloadBytes);
          frames.push_back(head);
          continue;
        }
        if (!readMore()) break;
      }
      testing::sendAll(fd, script(frames));
      // Until the client closes.
      while (readMore()) {
      }
      ::close(fd);
    });
  }
  ~ScriptedChannelServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

TEST(ChannelTest, RequestsAfterTheGoawaysIdFailAsNotTakenAndTheOthersAreAnswered) {
  ScriptedChannelServer server(3, [](const std::vector<channel::FrameHead>& frames) {
    std::string out;
    if (frames.size() < 3) return out;
    // Took the first, not the two after it; answers the one it took after saying so.
    channel::appendGoaway(out, frames[0].id);
    channel::appendResponse(out, frames[0].id, 200, Headers(), "first");
    return out;
  });
  ClientOptions co;
  co.threads = 1;
  auto client = channelClient(server.port(), co);
  Results results;
  // From a thread that is not the client's, one after the other: one loop, one channel, ids in
  // this order.
  for (const char* key : {"a", "b", "c"}) client->send(post("/x", key), results.callback(key));
  ASSERT_TRUE(results.waitFor(3));
  int answered = 0;
  int notTaken = 0;
  for (const auto& [key, r] : results.get()) {
    if (key == "a") {
      ASSERT_TRUE(r.ok()) << r.status().toString();
      EXPECT_EQ(r->body, "first");
      ++answered;
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
      EXPECT_NE(r.status().message().find("did not take the request"), std::string::npos)
          << r.status().toString();
      ++notTaken;
    }
  }
  EXPECT_EQ(answered, 1);
  EXPECT_EQ(notTaken, 2);
  // The channel ends on its loop after the answers went out.
  EXPECT_TRUE(channelsClosed(*client)) << client->core().openChannels() << " channels still open";
}

constexpr const char* kUpgradeAnswer =
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: kshard-channel/1\r\n\r\n";

// Reads a client's upgrade request from `fd`; returns what came after it.
std::string readUpgradeRequest(int fd) {
  std::string in;
  char buf[512];
  while (in.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    in.append(buf, static_cast<std::size_t>(n));
  }
  return in.substr(in.find("\r\n\r\n") + 4);
}

// One loop (so one channel), and a server that reads nothing for 300 ms ends it.
auto impatientClient(const sockaddr_in& server) {
  ClientOptions co;
  co.threads = 1;
  co.requestTimeout = milliseconds(300);
  return channelClient(ntohs(server.sin_port), co);
}

TEST(ChannelTest, AServerThatReadsNothingForRequestTimeoutEndsTheChannel) {
  // Accepts, answers the upgrade, then reads nothing more until the client goes away.
  sockaddr_in addr{};
  const int listener = testing::listenOnLoopback(4, addr);
  ASSERT_GE(listener, 0);
  std::atomic<bool> finished{false};
  std::thread server([listener, &finished] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    readUpgradeRequest(fd);
    testing::sendAll(fd, kUpgradeAnswer);
    // The client may not get its FIN through a full receive window: wait for the test instead.
    finished.wait(false);
    ::close(fd);
  });
  auto client = impatientClient(addr);
  // More than the sockets' buffers hold, so the write cannot finish; the request's own deadline
  // is far.
  const auto r = client->sendSync(post("/x", std::string(32u << 20, 'x'), kWait));
  EXPECT_FALSE(r.ok());
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(r.status().message().find("the server read nothing for 300 ms"), std::string::npos)
        << r.status().toString();
  }
  EXPECT_EQ(client->core().openChannels(), 0u);
  client.reset();
  finished = true;
  finished.notify_all();
  server.join();
  ::close(listener);
}

TEST(ChannelTest, ARequestWrittenWholeBeforeTheServerStalledHasAnUnknownOutcome) {
  // Reads the first request frame whole, then nothing more until the client goes away: the
  // second, larger than the sockets' buffers, cannot go out.
  sockaddr_in addr{};
  const int listener = testing::listenOnLoopback(4, addr);
  ASSERT_GE(listener, 0);
  std::atomic<bool> finished{false};
  std::atomic<bool> bothSent{false};
  std::thread server([listener, &finished, &bothSent] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    std::string in = readUpgradeRequest(fd);
    // Both requests wait for the channel, so they go out in one write.
    bothSent.wait(false);
    testing::sendAll(fd, kUpgradeAnswer);
    channel::FrameHead head;
    std::string error;
    char buf[1];
    while (!(in.size() >= channel::kHeadBytes && channel::parseHead(in, head, error) &&
             in.size() >= channel::kHeadBytes + head.payloadBytes)) {
      const ssize_t n = ::recv(fd, buf, 1, 0);  // byte by byte: nothing of the second frame
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    // The client may not get its FIN through a full receive window: wait for the test instead.
    finished.wait(false);
    ::close(fd);
  });
  auto client = impatientClient(addr);
  Results results;
  // One loop, one channel, one write: the small request, then the large one.
  client->send(post("/small", "a", kWait), results.callback("small"));
  client->send(post("/large", std::string(32u << 20, 'x'), kWait), results.callback("large"));
  bothSent = true;
  bothSent.notify_all();
  EXPECT_TRUE(results.waitFor(2));
  for (const auto& [key, r] : results.get()) {
    EXPECT_FALSE(r.ok()) << key;
    if (r.ok()) continue;
    if (key == "small") {
      // The server has it whole and might act on it: not a failure to retry elsewhere.
      EXPECT_EQ(r.status().code(), StatusCode::kOutcomeUnknown) << r.status().toString();
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().toString();
    }
  }
  EXPECT_EQ(client->core().openChannels(), 0u);
  client.reset();
  finished = true;
  finished.notify_all();
  server.join();
  ::close(listener);
}

TEST(ChannelTest, AStoppingServersRefusalFailsTheRequestsAsNotSentWithoutGivingUpChannels) {
  ScriptedChannelServer server(
      0, [](const std::vector<channel::FrameHead>&) { return std::string(); },
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
  auto client = channelClient(server.port());
  const auto r = client->sendSync(post("/x", ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("the server is stopping"), std::string::npos)
      << r.status().toString();
  EXPECT_TRUE(client->core().usesChannels()) << "a 503 is not a server without channels";
}

// A server that admits its callers from their heads (ServerOptions::admit) opens a channel only
// for an upgrade with a credential it takes. On its refusal the request goes as plain HTTP, where
// the server gives it its own answer; that is no sign of a server without channels.
TEST(ChannelTest, TheUpgradeCarriesTheCallersCredentialAndARefusalKeepsChannels) {
  std::atomic<int> admitted{0};
  ServerOptions so;
  so.admit = [&admitted](const Request& head) -> std::optional<Response> {
    if (head.headers.get("authorization") != std::optional<std::string_view>("Bearer good")) {
      return Response::error(401, "Unauthenticated", "who are you");
    }
    ++admitted;
    return std::nullopt;
  };
  ChannelServer s(so);
  ASSERT_TRUE(s.start());

  ClientOptions stranger;
  stranger.channelAuthorization = [] { return std::string("Bearer guessed"); };
  auto refused = channelClient(s.port(), stranger);
  const auto r = refused->sendSync(post("/echo", "x"));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("who are you"), std::string::npos) << r->body;
  EXPECT_TRUE(refused->core().usesChannels()) << "a refused caller is no server without channels";

  ClientOptions friendly;
  friendly.threads = 1;
  friendly.channelAuthorization = [] { return std::string("Bearer good"); };
  auto client = channelClient(s.port(), friendly);
  for (int i = 0; i < 3; ++i) {
    const auto ok = client->sendSync(post("/echo", "hello " + std::to_string(i)));
    ASSERT_TRUE(ok.ok()) << ok.status().toString();
    EXPECT_EQ(ok->body, "hello " + std::to_string(i));
  }
  EXPECT_EQ(client->core().channelsOpened(), 1u);
  EXPECT_EQ(admitted.load(), 1) << "the frames of an admitted channel are not admitted again";
}

TEST(ChannelTest, TheServerExplainsWhatARequestForAChannelLacks) {
  ChannelServer s;
  ASSERT_TRUE(s.start());
  const struct {
    std::string request;
    std::string expected;
  } cases[] = {
      {"GET /v1/channel HTTP/1.1\r\nHost: x\r\n\r\n",
       "a channel needs the header Upgrade: kshard-channel/1"},
      {"GET /v1/channel HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
       "a channel needs the header Upgrade: kshard-channel/1"},
      {"GET /v1/channel HTTP/1.1\r\nHost: x\r\nUpgrade: kshard-channel/1\r\n\r\n",
       "a channel needs the header Connection: Upgrade"},
      {"POST /v1/channel HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "Allow: GET"},
      {"GET /v1/channel HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n"
       "Upgrade: h2c, kshard-channel/1\r\n\r\n",
       "101 Switching Protocols"},
  };
  for (const auto& c : cases) {
    testing::RawConnection raw(s.port());
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(raw.send(c.request));
    const std::string got = raw.readUntil(c.expected, kWait);
    EXPECT_NE(got.find(c.expected), std::string::npos) << c.request << "\n got: " << got;
  }
}

TEST(ChannelTest, AMalformedFrameFromTheServerFailsWhatIsInFlightWithAnUnknownOutcome) {
  ScriptedChannelServer server(1, [](const std::vector<channel::FrameHead>&) {
    return std::string(
        "\0\0\0\x09\x07"
        "12345678",
        13);  // type 7
  });
  auto client = channelClient(server.port());
  const auto r = client->sendSync(post("/x", ""));
  ASSERT_FALSE(r.ok());
  // The request had gone out on the channel: the server may have acted on it.
  EXPECT_EQ(r.status().code(), StatusCode::kOutcomeUnknown);
  EXPECT_NE(r.status().message().find("malformed frame: unknown frame type 7"), std::string::npos)
      << r.status().toString();
}

TEST(ChannelTest, ServerClosesAChannelThatSendsAMalformedFrameAndServesOthers) {
  ChannelServer s;
  ASSERT_TRUE(s.start());
  testing::RawConnection raw(s.server.port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(
      raw.send("GET /v1/channel HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
               "Upgrade: kshard-channel/1\r\n\r\n"));
  EXPECT_NE(raw.readUntil("\r\n\r\n", kWait).find("101 Switching Protocols"), std::string::npos);
  std::string frame;
  Headers fields;
  channel::appendRequest(frame, 1, Method::kPost, "/echo", fields, "one");
  ASSERT_TRUE(raw.send(frame));
  EXPECT_NE(raw.readUntil("one", kWait).find("one"), std::string::npos);
  // A repeated id is a client that lost count: the channel closes.
  ASSERT_TRUE(raw.send(frame));
  raw.readUntil("", kWait);
  EXPECT_TRUE(raw.closedByPeer());
  auto client = channelClient(s.server.port());
  const auto r = client->sendSync(post("/echo", "still here"));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->body, "still here");
}

}  // namespace
}  // namespace kshard::http
