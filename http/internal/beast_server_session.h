// Internal to BeastServer (beast_server.cc, beast_http_session.cc, beast_channel_session.cc): the
// server's core and the sessions it holds, one per connection. A connection starts as an HTTP/1.1
// session (which also writes streamed answers); a request for a channel (http/channel.h) hands the
// connection to a channel session, which serves frames on it until it closes. Never include it
// from a public header.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/log_throttle.h"
#include "http/beast_server.h"
#include "http/internal/beast_stream.h"
#include "http/internal/io_threads_impl.h"
#include "http/router.h"

namespace kshard::http {

namespace beast_detail {

// After answering a request we will not read (413), the peer may still be sending its body:
// closing at once would make the kernel reset the connection and the peer could lose our answer.
// So we stop sending and drain what arrives for a short while first, as nginx's lingering close.
inline constexpr std::chrono::seconds kLingerTime{2};

inline std::string bodyTooLarge(std::size_t limit) {
  return "request body exceeds " + std::to_string(limit) + " bytes";
}

inline unsigned validStatus(int status) {
  return (status >= 100 && status <= 999) ? static_cast<unsigned>(status) : 500u;
}

// One connection of the server, as the core holds it (Core::sessions), with what every session
// serves a connection with. The destructor gives back the connection's place (Core::forget),
// unless the session handed the connection on (handOver).
class ServerSession {
 public:
  ServerSession(BeastServer::Core& core, AnyStream stream, const net::ip::address& peer,
                std::string remote);
  virtual ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  const net::any_io_executor& executor() const { return exec_; }

  // Begins serving the connection, on its executor (at once when called there).
  virtual void start() = 0;
  // Server stop: finish what is in progress, take nothing further. Calls `done` on the session's
  // executor once the session has taken the stop in (BeastServer::stop waits for that before it
  // looks at what is busy: until then a channel's goaway is not queued, and does not keep it busy).
  virtual void shutdown(std::function<void()> done) = 0;
  // Closes the connection at once, then calls `done`, on the session's executor.
  virtual void forceClose(std::function<void()> done) = 0;

 protected:
  inline void setBusy(bool busy);
  // The connection goes on as `next` (which took the stream and the buffer): the core holds
  // `next` in this session's place, and this session gives back nothing when destroyed.
  void handOver(const std::shared_ptr<ServerSession>& next);

  BeastServer::Core& core_;
  const std::shared_ptr<BeastServer::Core> keepCore_;  // see Core::keepAlive
  const net::any_io_executor exec_;
  AnyStream stream_;
  const net::ip::address peer_;
  const std::string remote_;
  // The deadline of the current read or write, or of the idle wait; past it the connection closes.
  Watchdog watchdog_;
  beast::flat_buffer buffer_;
  bool busy_ = false;

 private:
  bool handedOver_ = false;
};

// A new connection's session: HTTP/1.1 (beast_http_session.cc).
std::shared_ptr<ServerSession> makeHttpSession(BeastServer::Core& core, AnyStream stream,
                                               const tcp::endpoint& remote);
// The session of a connection upgraded to a channel (beast_channel_session.cc): takes the
// stream, and the buffer with what the client sent behind its upgrade request.
std::shared_ptr<ServerSession> makeChannelSession(BeastServer::Core& core, AnyStream stream,
                                                  beast::flat_buffer buffer,
                                                  const net::ip::address& peer,
                                                  const std::string& remote);

}  // namespace beast_detail

struct BeastServer::Core : ServerCore, std::enable_shared_from_this<BeastServer::Core> {
  using ServerSession = beast_detail::ServerSession;

  explicit Core(ServerOptions o) : ServerCore(std::move(o)) {
    if (options.ioThreads == nullptr) {
      own = std::make_unique<IoThreads>(IoThreadsOptions{
          options.threads, IoThreadsOptions::Model::kSharedContext, options.logger});
    }
    acceptorExec = io().connectionExecutor(0);
  }

  IoThreads::Impl& io() { return own ? own->impl() : options.ioThreads->impl(); }
  // What a handler holds to keep the core alive: needed with shared threads, which may run a
  // session's last handlers after the server is gone. With its own threads the core outlives
  // every handler (they are destroyed with `own`), and holding it would be a cycle.
  std::shared_ptr<Core> keepAlive() { return own ? nullptr : shared_from_this(); }

  void doAccept();
  void onAccept(const beast_detail::beast::error_code& ec, beast_detail::tcp::socket socket);
  // Takes a place for a connection from `peer`, within maxConnections and
  // maxConnectionsPerPeer; false (and logged, at most once per interval) when there is none.
  bool admit(const beast_detail::net::ip::address& peer);
  // Called twice per request, from every I/O thread: no lock unless stop() is waiting.
  void sessionBusy(bool busy) {
    if (busy) {
      busyCount.fetch_add(1);
    } else if (busyCount.fetch_sub(1) == 1 && stopping.load()) {
      // stop() stores `stopping` before it reads busyCount under `mu`, and this thread
      // decremented before reading `stopping` (both sequentially consistent): either stop()
      // sees zero, or this notify comes after it waits.
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_all();
    }
  }
  void noteChannelQueued(std::size_t bytes) {
    std::size_t seen = channelQueuedHighWater.load();
    while (bytes > seen && !channelQueuedHighWater.compare_exchange_weak(seen, bytes)) {
    }
  }
  void forget(ServerSession* s, const beast_detail::net::ip::address& peer, bool wasBusy) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s);
    if (options.maxConnectionsPerPeer > 0) {
      if (const auto it = perPeer.find(peer); it != perPeer.end() && --it->second == 0) {
        perPeer.erase(it);
      }
    }
    if (wasBusy) --busyCount;
    cv.notify_all();
  }
  // The connection of `from` goes on as `to` (ServerSession::handOver): it keeps its place.
  void replace(ServerSession* from, const std::shared_ptr<ServerSession>& to) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(from);
    sessions.emplace(to.get(), to);
  }

  std::optional<beast_detail::ssl::context> tls;
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::size_t> channelQueuedHighWater{0};

  std::mutex mu;
  std::condition_variable cv;
  std::map<ServerSession*, std::weak_ptr<ServerSession>> sessions;
  // open connections by address, when bounded
  std::map<beast_detail::net::ip::address, std::size_t> perPeer;
  LogThrottle refusedLog{std::chrono::seconds(5)};
  std::uint64_t refused = 0;
  // Sessions with a request between dispatch and its answer written.
  std::atomic<std::size_t> busyCount{0};
  bool running = false;               // guarded by mu
  std::atomic<bool> stopping{false};  // written under mu

  // The server's own threads, when it was given none to share (ServerOptions::ioThreads).
  // Declared after everything sessions use, so it is destroyed before: the handlers its loops
  // still hold may own the last reference to a session, whose destructor uses the members above.
  std::unique_ptr<IoThreads> own;
  // The listener runs on one loop (on a strand when several threads run that loop); it exists
  // from start() until stop(), and is only touched there and on its executor. Declared after
  // `own`, so destroyed before the loop it belongs to.
  beast_detail::net::any_io_executor acceptorExec;
  std::optional<beast_detail::tcp::acceptor> acceptor;
};

namespace beast_detail {

// What a Responder or StreamWriter holds: the core first, so it is released last and the
// io_context outlives the session it may have to destroy.
template <typename Session>
struct SessionRef {
  std::shared_ptr<BeastServer::Core> core;
  std::shared_ptr<Session> session;
};

inline void ServerSession::setBusy(bool busy) {
  if (busy_ == busy) return;
  busy_ = busy;
  core_.sessionBusy(busy);
}

}  // namespace beast_detail

}  // namespace kshard::http
