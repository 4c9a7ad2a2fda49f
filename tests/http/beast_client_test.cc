// The Beast client's connection pool against a scripted server that does what kshard's own server
// never does: it closes a keep-alive connection right after a response, sends bytes nobody asked
// for, answers before it read the request, or sends a response in pieces.
#include "http/beast_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/internal/beast_client_core.h"
#include "tests/http/test_support.h"

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kWait{10000};  // how long a test waits for something that should happen

// One accepted connection, as the script sees it: blocking reads and writes of raw bytes.
class Peer {
 public:
  explicit Peer(int fd) : fd_(fd) {}

  // Reads until the end of a request head; returns the head, or "" when the client closed.
  std::string readHead() {
    while (buffered_.find("\r\n\r\n") == std::string::npos) {
      if (!fill()) return "";
    }
    const std::size_t end = buffered_.find("\r\n\r\n") + 4;
    std::string head = buffered_.substr(0, end);
    buffered_.erase(0, end);
    return head;
  }
  // Reads `n` body bytes; false when the client closed first.
  bool readBody(std::size_t n) {
    while (buffered_.size() < n) {
      if (!fill()) return false;
    }
    buffered_.erase(0, n);
    return true;
  }
  // Reads a whole request with a Content-Length body; false when the client closed.
  bool readRequest() {
    const std::string head = readHead();
    return !head.empty() && readBody(contentLength(head));
  }
  bool write(std::string_view data) { return testing::sendAll(fd_, data); }

  static std::size_t contentLength(const std::string& head) {
    const std::size_t at = head.find("Content-Length: ");
    return at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
  }

 private:
  bool fill() {
    char buf[64 * 1024];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    buffered_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  std::string buffered_;
};

std::string ok(std::string_view body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         std::string(body);
}

// A server on 127.0.0.1 that runs `script` on a thread of its own for each connection it accepts,
// passing the connection's number (0 for the first), and closes the connection when it returns.
class ScriptedServer {
 public:
  using Script = std::function<void(Peer&, int)>;

  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    sockaddr_in addr{};
    listener_ = testing::listenOnLoopback(16, addr);
    EXPECT_GE(listener_, 0) << std::strerror(errno);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    acceptor_.join();
    ::close(listener_);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : connections_) t.join();
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_; }

 private:
  void acceptLoop() {
    while (!stopping_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int number = accepted_++;
      std::lock_guard<std::mutex> lock(mu_);
      connections_.emplace_back([this, fd, number] {
        Peer peer(fd);
        script_(peer, number);
        ::close(fd);
      });
    }
  }

  Script script_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
};

std::unique_ptr<BeastClient> clientFor(const ScriptedServer& server) {
  ClientOptions o;
  o.baseUrl = server.url();
  o.requestTimeout = kWait;
  auto c = makeBeastClient(o);
  EXPECT_TRUE(c.ok()) << c.status().toString();
  return c.ok() ? std::unique_ptr<BeastClient>(static_cast<BeastClient*>(c->release())) : nullptr;
}

// A POST: not idempotent, so the client never sends it twice on its own.
Request post(std::string body) {
  Request r;
  r.method = Method::kPost;
  r.target = "/v1/entities/counter/a";
  r.body = std::move(body);
  return r;
}

// Waits until `client` pools `n` idle connections; false when it did not within kWait.
bool waitForIdle(const BeastClient& client, std::size_t n) {
  const auto deadline = Clock::now() + kWait;
  while (client.core().idleCount() != n) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

TEST(BeastClientPool, AConnectionTheServerClosesWhileIdleLeavesThePool) {
  // Every connection answers one request, keep-alive, then closes.
  ScriptedServer server([](Peer& peer, int) {
    if (peer.readRequest()) peer.write(ok("once"));
  });
  auto client = clientFor(server);

  StatusOr<Response> first = client->sendSync(post("1"));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ(first->body, "once");
  ASSERT_TRUE(waitForIdle(*client, 0))
      << "the pool kept a connection the server closed: " << client->core().idleCount();

  // A POST is not retried by the client: it succeeds only if it does not go on the closed one.
  StatusOr<Response> second = client->sendSync(post("2"));
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_EQ(second->body, "once");
  EXPECT_EQ(server.accepted(), 2);
}

// The server's first connection sends a second response nobody asked for after the first one,
// in the same write or a moment later: the client must not pool that connection.
void expectUnaskedBytesDropTheConnection(bool sameWrite) {
  ScriptedServer server([sameWrite](Peer& peer, int number) {
    if (!peer.readRequest()) return;
    if (number == 0 && sameWrite) {
      peer.write(ok("first") + ok("unasked"));
    } else {
      peer.write(ok("first"));
      if (number == 0) {
        std::this_thread::sleep_for(milliseconds(5));
        peer.write(ok("unasked"));
      }
    }
    while (peer.readRequest()) peer.write(ok("again"));
  });
  auto client = clientFor(server);

  StatusOr<Response> first = client->sendSync(post("1"));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ(first->body, "first");
  ASSERT_TRUE(waitForIdle(*client, 0)) << "the pool kept a connection with unread bytes";

  StatusOr<Response> second = client->sendSync(post("2"));
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_EQ(second->body, "first") << "the unasked response was taken for the answer";
  EXPECT_EQ(server.accepted(), 2);
}

TEST(BeastClientPool, BytesNobodyAskedForInTheResponsesSegmentCloseTheConnection) {
  expectUnaskedBytesDropTheConnection(true);
}

TEST(BeastClientPool, BytesNobodyAskedForDropAnIdleConnection) {
  expectUnaskedBytesDropTheConnection(false);
}

TEST(BeastClientPool, AConnectionIsReusedForManyRequestsWhileTheServerKeepsIt) {
  ScriptedServer server([](Peer& peer, int) {
    while (peer.readRequest()) peer.write(ok("kept"));
  });
  auto client = clientFor(server);
  for (int i = 0; i < 50; ++i) {
    StatusOr<Response> r = client->sendSync(post(std::to_string(i)));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status().toString();
    EXPECT_EQ(r->body, "kept");
  }
  EXPECT_EQ(server.accepted(), 1);
  EXPECT_EQ(client->core().idleCount(), 1u);
}

// The server answers as soon as it has the head, before it reads the body: the client still
// writes the whole request, then reads the answer, and keeps the connection.
TEST(BeastClientPool, AnAnswerThatComesBeforeTheBodyIsReadAfterTheWrite) {
  ScriptedServer server([](Peer& peer, int) {
    for (;;) {
      const std::string head = peer.readHead();
      if (head.empty()) return;
      peer.write("HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nearly");
      if (!peer.readBody(Peer::contentLength(head))) return;
    }
  });
  auto client = clientFor(server);
  // Larger than the socket buffers: the answer arrives while the client is still writing.
  const std::string big(8u << 20, 'x');
  for (int i = 0; i < 2; ++i) {
    StatusOr<Response> r = client->sendSync(post(big));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status().toString();
    EXPECT_EQ(r->status, 202);
    EXPECT_EQ(r->body, "early");
  }
  EXPECT_EQ(server.accepted(), 1);
}

// A response in pieces: the wait for readability fires on the first, and the read goes on.
TEST(BeastClientPool, AResponseInPiecesIsReadWhole) {
  ScriptedServer server([](Peer& peer, int) {
    while (peer.readRequest()) {
      const std::string answer = ok(std::string(100000, 'y'));
      for (std::size_t at = 0; at < answer.size(); at += 7000) {
        if (!peer.write(std::string_view(answer).substr(at, 7000))) return;
        std::this_thread::sleep_for(milliseconds(1));  // separate segments, separate reads
      }
    }
  });
  auto client = clientFor(server);
  for (int i = 0; i < 3; ++i) {
    StatusOr<Response> r = client->sendSync(post("p"));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status().toString();
    EXPECT_EQ(r->body, std::string(100000, 'y'));
  }
  EXPECT_EQ(server.accepted(), 1);
}

// The request timeout holds while the client waits for the server to send anything at all.
TEST(BeastClientPool, AServerThatNeverAnswersTimesOutAndItsConnectionIsNotPooled) {
  ScriptedServer server([](Peer& peer, int) {
    while (peer.readRequest()) {
    }
  });
  auto client = clientFor(server);
  Request r = post("silent");
  r.timeout = milliseconds(200);
  StatusOr<Response> res = client->sendSync(std::move(r));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kDeadlineExceeded) << res.status().toString();
  EXPECT_EQ(client->core().idleCount(), 0u);
}

// --- Reading a response: its framing and its ends ----------------------------------------------

// Sends `answer` to every request until the client closes; `thenClose` closes after the first.
ScriptedServer::Script answering(std::string answer, bool thenClose) {
  return [answer = std::move(answer), thenClose](Peer& peer, int) {
    while (peer.readRequest()) {
      if (!peer.write(answer) || thenClose) return;
    }
  };
}

TEST(BeastClientRead, ABodyThatRunsToTheCloseIsReadWholeAndItsConnectionIsNotPooled) {
  ScriptedServer server(
      answering("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + std::string(50000, 'z'), true));
  auto client = clientFor(server);
  StatusOr<Response> r = client->sendSync(post("x"));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->body, std::string(50000, 'z'));
  EXPECT_EQ(client->core().idleCount(), 0u);
}

TEST(BeastClientRead, AResponseCutOffByTheCloseFails) {
  ScriptedServer server(
      answering("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b", true));
  auto client = clientFor(server);
  StatusOr<Response> r = client->sendSync(post("x"));
  ASSERT_FALSE(r.ok()) << "a cut-off body was taken for a response: " << r->body;
  // The request went out: the server may have acted on it.
  EXPECT_EQ(r.status().code(), StatusCode::kOutcomeUnknown) << r.status().toString();
  EXPECT_NE(r.status().message().find("reading the response"), std::string::npos)
      << r.status().toString();
}

// The server read the request and went away (a sidecar or a pod killed mid-request): it may
// have processed it, so the failure is OutcomeUnknown, which no caller retries blindly.
// Unavailable would tell the sidecar's router to send the message to the next owner.
TEST(BeastClientRead, AServerThatClosesWithoutAnsweringFailsWithAnUnknownOutcome) {
  ScriptedServer server([](Peer& peer, int) { peer.readRequest(); });
  auto client = clientFor(server);
  StatusOr<Response> r = client->sendSync(post("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutcomeUnknown) << r.status().toString();
  EXPECT_NE(r.status().message().find("reading the response"), std::string::npos)
      << r.status().toString();
  EXPECT_EQ(server.accepted(), 1) << "a POST was sent twice";
}

TEST(BeastClientRead, AChunkedResponseInPiecesIsReadWhole) {
  ScriptedServer server([](Peer& peer, int) {
    while (peer.readRequest()) {
      peer.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
      std::this_thread::sleep_for(milliseconds(2));  // separate segments, separate reads
      peer.write("6\r\n world\r\n");
      std::this_thread::sleep_for(milliseconds(2));
      peer.write("0\r\n\r\n");
    }
  });
  auto client = clientFor(server);
  for (int i = 0; i < 2; ++i) {
    StatusOr<Response> r = client->sendSync(post("x"));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status().toString();
    EXPECT_EQ(r->body, "hello world");
  }
  EXPECT_EQ(server.accepted(), 1);
}

TEST(BeastClientRead, AnAnswerToHeadHasNoBodyWhateverItsLength) {
  ScriptedServer server(answering("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", false));
  auto client = clientFor(server);
  for (int i = 0; i < 2; ++i) {
    Request head;
    head.method = Method::kHead;
    head.target = "/";
    StatusOr<Response> r = client->sendSync(std::move(head));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status().toString();
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->body.empty());
  }
  EXPECT_EQ(server.accepted(), 1);
}

TEST(BeastClientRead, AHeaderOverTheLimitFails) {
  ScriptedServer server(answering(
      "HTTP/1.1 200 OK\r\nX-Big: " + std::string(70000, 'h') + "\r\nContent-Length: 0\r\n\r\n",
      false));
  auto client = clientFor(server);
  StatusOr<Response> r = client->sendSync(post("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutcomeUnknown) << r.status().toString();
  EXPECT_NE(r.status().message().find("header"), std::string::npos) << r.status().toString();
}

TEST(BeastClientRead, ADeclaredLengthOverMaxResponseBytesFailsBeforeTheBodyIsRead) {
  ScriptedServer server(answering(
      "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + std::string(1000, 'b'), false));
  ClientOptions o;
  o.baseUrl = server.url();
  o.requestTimeout = kWait;
  o.maxResponseBytes = 4096;
  auto client = makeBeastClient(o);
  ASSERT_TRUE(client.ok());
  StatusOr<Response> r = (*client)->sendSync(post("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().toString();
}

}  // namespace
}  // namespace kshard::http
