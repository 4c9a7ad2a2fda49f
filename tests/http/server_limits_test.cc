// What a peer can make the Beast server hold, and for how long: connections beyond the caps,
// channels whose peer floods frames without reading, writes that make no progress, frames sent
// a byte at a time. Over real sockets on 127.0.0.1, with peers of the test's own that do what
// kshard's clients never would.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/beast_server.h"
#include "http/channel.h"
#include "http/internal/channel_flow.h"
#include "tests/http/test_support.h"

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::textResponse;

constexpr milliseconds kWait{10000};  // how long a test waits for something that should happen

// A TCP connection to 127.0.0.1:port from `source` (any address of 127/8), with a receive buffer
// of `receiveBuffer` bytes when not 0 (set before connecting, so the window stays that small).
class Peer {
 public:
  explicit Peer(std::uint16_t port, const char* source = "127.0.0.1", int receiveBuffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receiveBuffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
    }
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0 &&
                 ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~Peer() {
    if (fd_ >= 0) ::close(fd_);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  bool connected() const { return connected_; }
  bool send(std::string_view data) { return testing::sendAll(fd_, data); }

  // Sends as much of `data` as the socket takes within `patience`; the bytes sent, or -1 once
  // the server has closed the connection.
  long sendSome(std::string_view data, milliseconds patience) {
    long sent = 0;
    while (!data.empty()) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(patience.count())) <= 0) return sent;
      if (p.revents & (POLLERR | POLLHUP)) return -1;
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EAGAIN) continue;
      if (n <= 0) return -1;
      data.remove_prefix(static_cast<std::size_t>(n));
      sent += n;
    }
    return sent;
  }

  // Reads until `marker` arrived; false when it did not within kWait.
  bool readUntil(std::string_view marker) {
    const auto deadline = Clock::now() + kWait;
    while (received_.find(marker) == std::string::npos) {
      if (!readSome(deadline)) return false;
    }
    return true;
  }

  // Waits, reading nothing, until the server closes (or resets) the connection; false when it
  // did not before `deadline`.
  bool waitClosed(Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLRDHUP, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) > 0 &&
          (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        return true;
      }
    }
  }

  // Reads and discards until the server closes; false when it did not before `deadline`.
  bool drainUntilClosed(Clock::time_point deadline) {
    while (readSome(deadline)) {
    }
    return closed_;
  }

 private:
  bool readSome(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || closed_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    received_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

constexpr std::string_view kUpgrade =
    "GET /v1/channel HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
    "Upgrade: kshard-channel/1\r\n\r\n";

// Request frames with ids from `firstId`, for `target` with `body`, one after the other.
std::string requestFrames(std::uint64_t firstId, std::size_t count, Method method,
                          std::string_view target, std::string_view body = "") {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    channel::appendRequest(out, firstId + i, method, target, Headers(), body);
  }
  return out;
}

// Waits until `condition` holds; false when it did not within kWait.
template <typename Condition>
bool eventually(Condition condition) {
  const auto deadline = Clock::now() + kWait;
  while (!condition()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// A Beast server with a route answered at once and one whose answer is more than the sockets'
// buffers hold (16 MiB); with `channels`, it accepts kshard channels.
struct TestServer {
  TestServer(ServerOptions o, bool channels) : server(withChannels(std::move(o), channels)) {
    server.route(Method::kGet, "/ok", [](Request, Responder r) { r.send(textResponse("ok")); });
    server.route(Method::kGet, "/big",
                 [](Request, Responder r) { r.send(textResponse(std::string(16u << 20, 'b'))); });
  }
  static ServerOptions withChannels(ServerOptions o, bool channels) {
    o.acceptChannels = channels;
    return o;
  }
  BeastServer server;
};

// True when `peer` is served: a GET /ok answered.
bool served(Peer& peer) {
  return peer.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n") && peer.readUntil("ok");
}

TEST(ServerLimitsTest, ConnectionsBeyondTheCapAreClosedAtOnce) {
  ServerOptions o;
  o.maxConnections = 2;
  TestServer s(o, false);
  BeastServer& server = s.server;
  ASSERT_TRUE(server.start().ok());
  auto first = std::make_unique<Peer>(server.port());
  Peer second(server.port());
  ASSERT_TRUE(first->connected() && second.connected());
  ASSERT_TRUE(eventually([&] { return server.openConnections() == 2; }));
  Peer third(server.port());
  ASSERT_TRUE(third.connected()) << "the kernel completes the handshake before the accept";
  EXPECT_TRUE(third.drainUntilClosed(Clock::now() + kWait)) << "the third connection was served";
  EXPECT_EQ(server.connectionsRefused(), 1u);
  // A place that frees up is taken by the next connection.
  first.reset();
  ASSERT_TRUE(eventually([&] { return server.openConnections() == 1; }));
  Peer fourth(server.port());
  EXPECT_TRUE(served(fourth));
  server.stop();
}

TEST(ServerLimitsTest, ConnectionsBeyondThePerPeerCapAreClosedAndOtherPeersServed) {
  ServerOptions o;
  o.maxConnectionsPerPeer = 1;
  TestServer s(o, false);
  BeastServer& server = s.server;
  ASSERT_TRUE(server.start().ok());
  Peer first(server.port(), "127.0.0.2");
  ASSERT_TRUE(first.connected());
  ASSERT_TRUE(eventually([&] { return server.openConnections() == 1; }));
  Peer again(server.port(), "127.0.0.2");
  EXPECT_TRUE(again.drainUntilClosed(Clock::now() + kWait));
  EXPECT_EQ(server.connectionsRefused(), 1u);
  Peer other(server.port(), "127.0.0.3");
  EXPECT_TRUE(served(other));
  server.stop();
}

// ServerOptions::admit: a request it refuses is answered from its head alone. Its body is not
// waited for, nor held, and no handler sees it; a channel's upgrade is admitted like any request.
TEST(ServerLimitsTest, ARequestTheAdmissionRefusesIsAnsweredBeforeItsBodyIsSent) {
  std::mutex mu;
  std::vector<std::string> heads;  // what the admission saw: "method target from"
  std::atomic<int> handled{0};
  ServerOptions o;
  o.admit = [&](const Request& head) -> std::optional<Response> {
    {
      std::lock_guard lock(mu);
      heads.push_back(std::string(methodName(head.method)) + " " + head.target + " " +
                      head.remoteAddress.substr(0, head.remoteAddress.find(':')));
    }
    if (head.headers.get("authorization") == std::optional<std::string_view>("Bearer good")) {
      return std::nullopt;
    }
    return Response::error(401, "Unauthenticated", "who are you");
  };
  TestServer s(o, true);
  s.server.route(Method::kPost, "/take", [&](Request r, Responder res) {
    ++handled;
    res.send(textResponse("took " + std::to_string(r.body.size())));
  });
  ASSERT_TRUE(s.server.start().ok());

  Peer stranger(s.server.port(), "127.0.0.2");
  ASSERT_TRUE(stranger.send("POST /take HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n"));
  EXPECT_TRUE(stranger.readUntil("who are you")) << "no answer before the body was sent";
  EXPECT_TRUE(stranger.drainUntilClosed(Clock::now() + kWait))
      << "the connection goes on, though its body was never read";
  EXPECT_EQ(handled.load(), 0);

  // A method no route takes is answered at once too, before its body.
  Peer unknown(s.server.port(), "127.0.0.2");
  ASSERT_TRUE(unknown.send("FOO /take HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n"));
  EXPECT_TRUE(unknown.readUntil("501 ")) << "no answer before the body was sent";
  EXPECT_TRUE(unknown.drainUntilClosed(Clock::now() + kWait));

  Peer upgrade(s.server.port(), "127.0.0.2");
  ASSERT_TRUE(upgrade.send(kUpgrade));
  EXPECT_TRUE(upgrade.readUntil("401 ")) << "a channel was opened for a caller the server refuses";
  EXPECT_TRUE(upgrade.drainUntilClosed(Clock::now() + kWait));

  Peer friendly(s.server.port());
  ASSERT_TRUE(friendly.send(
      "POST /take HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Length: 5\r\n\r\n"
      "hello"));
  EXPECT_TRUE(friendly.readUntil("took 5"));
  EXPECT_EQ(handled.load(), 1);
  std::lock_guard lock(mu);
  EXPECT_EQ(heads, (std::vector<std::string>{"POST /take 127.0.0.2", "GET /v1/channel 127.0.0.2",
                                             "POST /take 127.0.0.1"}));
  s.server.stop();
}

// A peer that sends frames as fast as the server takes them and never reads its answers: the
// answers the server keeps stay within maxChannelQueuedBytes (reading stops there), and once its
// write has made no progress for requestTimeout the connection is closed, though frames keep
// coming.
TEST(ServerLimitsTest, AChannelFloodedWithoutReadingIsBoundedAndClosedAfterTheWriteTimeout) {
  ServerOptions o;
  o.requestTimeout = milliseconds(500);
  o.maxChannelQueuedBytes = 64 * 1024;
  TestServer s(o, true);
  ASSERT_TRUE(s.server.start().ok());
  Peer peer(s.server.port(), "127.0.0.1", 4096);
  ASSERT_TRUE(peer.send(kUpgrade));
  ASSERT_TRUE(peer.readUntil("\r\n\r\n"));
  // Until the server stops taking frames (a send blocks for 500 ms) or closes.
  const auto giveUp = Clock::now() + kWait;
  long sent = 0;
  bool closed = false;
  for (std::uint64_t id = 1; Clock::now() < giveUp; id += 256) {
    const std::string frames = requestFrames(id, 256, Method::kGet, "/ok");
    const long n = peer.sendSome(frames, milliseconds(500));
    closed = n < 0;
    if (closed || static_cast<std::size_t>(n) < frames.size()) break;
    sent += n;
  }
  EXPECT_TRUE(closed || peer.waitClosed(giveUp))
      << "the server kept the connection; " << sent << " bytes of frames sent";
  ASSERT_TRUE(eventually([&] { return s.server.openConnections() == 0; }));
  // Reading stopped at the bound, which is checked before each frame: one answer may pass it.
  EXPECT_GE(s.server.channelQueuedBytesHighWater(), o.maxChannelQueuedBytes);
  EXPECT_LE(s.server.channelQueuedBytesHighWater(), o.maxChannelQueuedBytes + 1024)
      << sent << " bytes of frames sent";
}

// Frames that keep arriving, and are read and answered, while a write of answers is stuck do not
// move its deadline.
TEST(ServerLimitsTest, AStuckWriteClosesTheChannelWhateverFramesArrive) {
  ServerOptions o;
  o.requestTimeout = milliseconds(500);
  o.maxChannelQueuedBytes = 64u << 20;  // reading goes on behind the stuck write
  TestServer s(o, true);
  ASSERT_TRUE(s.server.start().ok());
  Peer peer(s.server.port(), "127.0.0.1", 4096);
  ASSERT_TRUE(peer.send(kUpgrade));
  ASSERT_TRUE(peer.readUntil("\r\n\r\n"));
  ASSERT_TRUE(peer.send(requestFrames(1, 1, Method::kGet, "/big")));
  const auto started = Clock::now();
  const auto giveUp = started + kWait;
  bool closed = false;
  for (std::uint64_t id = 2; !closed && Clock::now() < giveUp; ++id) {
    closed = peer.sendSome(requestFrames(id, 1, Method::kGet, "/ok"), milliseconds(50)) < 0 ||
             peer.waitClosed(Clock::now() + milliseconds(50));
  }
  EXPECT_TRUE(closed) << "the frames kept the stuck write's connection open";
  EXPECT_LT(Clock::now() - started, milliseconds(5000));
}

// A frame sent a byte at a time must still arrive whole within requestTimeout of its first byte.
TEST(ServerLimitsTest, AFrameSentAByteAtATimeIsCutOffAfterTheTimeout) {
  ServerOptions o;
  o.requestTimeout = milliseconds(300);
  TestServer s(o, true);
  ASSERT_TRUE(s.server.start().ok());
  Peer peer(s.server.port());
  ASSERT_TRUE(peer.send(kUpgrade));
  ASSERT_TRUE(peer.readUntil("\r\n\r\n"));
  const std::string frame = requestFrames(1, 1, Method::kPost, "/ok", std::string(1000, 'x'));
  const auto giveUp = Clock::now() + kWait;
  std::size_t sent = 0;
  bool closed = false;
  while (!closed && sent < frame.size() && Clock::now() < giveUp) {
    closed =
        !peer.send(frame.substr(sent++, 1)) || peer.waitClosed(Clock::now() + milliseconds(20));
  }
  EXPECT_TRUE(closed) << sent << " of the frame's " << frame.size()
                      << " bytes were sent and the connection is still open";
}

// Handlers that keep their Responders, counting how many were held unanswered at most.
class Held {
 public:
  Handler handler() {
    return [this](Request, Responder r) {
      std::lock_guard lock(mu_);
      held_.push_back(std::move(r));
      most_ = std::max(most_, held_.size());
    };
  }
  std::size_t answerAll() {
    std::vector<Responder> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (auto& r : held) r.send(textResponse("done"));
    return held.size();
  }
  std::size_t most() {
    std::lock_guard lock(mu_);
    return most_;
  }

 private:
  std::mutex mu_;
  std::vector<Responder> held_;
  std::size_t most_ = 0;
};

TEST(ServerLimitsTest, AChannelTakesNoFurtherFrameWhileItsBoundOfRequestsIsInFlight) {
  Held held;  // outlives the server's handlers
  ServerOptions o;
  o.maxChannelRequestsInFlight = 4;
  TestServer s(o, true);
  s.server.route(Method::kPost, "/held", held.handler());
  ASSERT_TRUE(s.server.start().ok());
  Peer peer(s.server.port());
  ASSERT_TRUE(peer.send(kUpgrade));
  ASSERT_TRUE(peer.readUntil("\r\n\r\n"));
  // Ten in one write: the server reads them at once, and takes four.
  ASSERT_TRUE(peer.send(requestFrames(1, 10, Method::kPost, "/held")));
  std::size_t answered = 0;
  ASSERT_TRUE(eventually([&] {
    answered += held.answerAll();
    return answered == 10;
  })) << answered
      << " of 10 requests reached the handler";
  EXPECT_EQ(held.most(), 4u);
  // The last answer: a response frame (type 2) for id 10.
  EXPECT_TRUE(peer.readUntil(std::string("\x02\0\0\0\0\0\0\0\x0a", 9)));
}

}  // namespace
}  // namespace kshard::http
