// What a peer can make the Beast server hold, and for how long: connections beyond the caps.
// Over real sockets on 127.0.0.1, with peers of the test's own that do what kshard's clients
// never would.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/beast_server.h"
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

}  // namespace
}  // namespace kshard::http
