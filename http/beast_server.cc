#include "http/beast_server.h"

#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "http/internal/beast_server_session.h"
#include "http/internal/tls_context.h"

namespace kshard::http {

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary

// How long stop() waits for the I/O threads to carry out the final closes (and the listener's).
constexpr std::chrono::seconds kCloseWait{5};

// Asks every session of `live` to `end` itself (ServerSession::shutdown or forceClose); returns
// how many have yet to call back, counted down under the core's lock, which notifies its cv.
std::shared_ptr<std::size_t> endEach(BeastServer::Core& c,
                                     const std::vector<std::shared_ptr<ServerSession>>& live,
                                     void (ServerSession::*end)(std::function<void()>)) {
  auto left = std::make_shared<std::size_t>(live.size());
  for (const auto& s : live) {
    ((*s).*end)([&c, left] {
      std::lock_guard<std::mutex> lock(c.mu);
      --*left;
      c.cv.notify_all();
    });
  }
  return left;
}

}  // namespace

namespace beast_detail {

ServerSession::ServerSession(BeastServer::Core& core, AnyStream stream,
                             const net::ip::address& peer, std::string remote)
    : core_(core),
      keepCore_(core.keepAlive()),
      exec_(stream.tcp().get_executor()),
      stream_(std::move(stream)),
      peer_(peer),
      remote_(std::move(remote)),
      watchdog_(exec_) {}

ServerSession::~ServerSession() {
  if (!handedOver_) core_.forget(this, peer_, busy_);
}

void ServerSession::handOver(const std::shared_ptr<ServerSession>& next) {
  handedOver_ = true;
  core_.replace(this, next);
}

}  // namespace beast_detail

void BeastServer::Core::doAccept() {
  // Each connection goes to the next loop in turn, where it stays.
  acceptor->async_accept(
      io().connectionExecutor(io().nextLoop()),
      [this, keep = keepAlive()](const beast::error_code& ec, tcp::socket socket) {
        onAccept(ec, std::move(socket));
      });
}

void BeastServer::Core::onAccept(const beast::error_code& ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor || !acceptor->is_open()) return;
  if (ec) {
    // EMFILE and the like: this connection is lost, the listener goes on.
    if (options.logger) options.logger->warn("http accept failed", {{"error", ec.message()}});
    doAccept();
    return;
  }
  accepted.fetch_add(1);
  beast::error_code ignored;
  const auto remote = socket.remote_endpoint(ignored);
  if (!admit(remote.address())) {
    socket.close(ignored);
    doAccept();
    return;
  }
  socket.set_option(tcp::no_delay(true), ignored);
  beast::tcp_stream plain(std::move(socket));
  auto session = tls ? makeHttpSession(*this, AnyStream(std::move(plain), *tls), remote)
                     : makeHttpSession(*this, AnyStream(std::move(plain)), remote);
  bool accept = true;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) {
      accept = false;
    } else {
      sessions.emplace(session.get(), session);
    }
  }
  if (accept) {
    session->start();
  } else {
    session->forceClose([] {});
  }
  doAccept();
}

bool BeastServer::Core::admit(const net::ip::address& peer) {
  std::uint64_t occurrences = 0;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu);
    // Accepts are handled one at a time, and each admitted connection is in `sessions` from then
    // until its destructor (forget), which also gives back the peer's place.
    if (options.maxConnections > 0 && sessions.size() >= options.maxConnections) {
      why = "the server has " + std::to_string(options.maxConnections) + " connections open";
    } else if (options.maxConnectionsPerPeer > 0) {
      std::size_t& fromPeer = perPeer[peer];
      if (fromPeer >= options.maxConnectionsPerPeer) {
        why = "the peer has " + std::to_string(options.maxConnectionsPerPeer) + " connections open";
      } else {
        ++fromPeer;
      }
    }
    if (why.empty()) return true;
    ++refused;
    occurrences = refusedLog.occur(std::chrono::steady_clock::now());
  }
  if (occurrences > 0 && options.logger) {
    options.logger->warn(
        "http connection refused",
        {{"remote", peer.to_string()}, {"reason", why}, {"occurrences", occurrences}});
  }
  return false;
}

BeastServer::BeastServer(ServerOptions options)
    : ServerAdapter(std::make_shared<Core>(std::move(options))) {}

BeastServer::~BeastServer() { stop(); }

Status BeastServer::start() {
  Core& c = core<Core>();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.running || c.stopping) return failedPrecondition("the server was already started");
  }
  const std::string where = c.options.host + ":" + std::to_string(c.options.port);
  if (c.options.tls) {
    c.tls.emplace(ssl::context::tls_server);
    if (Status s = configureServerTls(*c.tls, *c.options.tls); !s.ok()) {
      return s.withContext("starting the server on " + where);
    }
  }
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(c.options.host, ec);
  if (ec) return invalidArgument("server host must be an IP address: " + c.options.host);
  const tcp::endpoint endpoint(address, c.options.port);
  c.acceptor.emplace(c.acceptorExec);
  if (c.acceptor->open(endpoint.protocol(), ec); ec) {
    return unavailable("opening a socket for " + where + ": " + ec.message());
  }
  c.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (c.acceptor->bind(endpoint, ec); ec) {
    return unavailable("binding " + where + ": " + ec.message());
  }
  if (c.acceptor->listen(net::socket_base::max_listen_connections, ec); ec) {
    return unavailable("listening on " + where + ": " + ec.message());
  }
  c.port = c.acceptor->local_endpoint().port();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.running = true;
  }
  net::post(c.acceptorExec, [&c, keep = c.keepAlive()] { c.doAccept(); });
  return {};
}

void BeastServer::stop(std::chrono::milliseconds grace) {
  Core& c = core<Core>();
  std::vector<std::shared_ptr<ServerSession>> live;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.running || c.stopping) return;
    c.stopping = true;
    for (auto& [ptr, weak] : c.sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  // The listener is closed and destroyed on its executor, and waited for: the port is free when
  // stop() returns, and the core holds no socket of the (perhaps shared) loops any more.
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> listenerClosed = closed->get_future();
  net::post(c.acceptorExec, [&c, keep = c.keepAlive(), closed] {
    beast::error_code ignored;
    c.acceptor->close(ignored);
    c.acceptor.reset();
    closed->set_value();
  });
  // Each session takes the stop in on its own executor; until it has, busyCount does not show
  // what the stop starts (a channel's goaway keeps its session busy until the client closed),
  // and forceClose, posted behind, would close a channel before its goaway was written: a
  // request the client sent meanwhile would be cut without its knowing it was not taken.
  auto shutdownsLeft = endEach(c, live, &ServerSession::shutdown);
  {
    std::unique_lock<std::mutex> lock(c.mu);
    c.cv.wait_for(lock, grace,
                  [&c, &shutdownsLeft] { return *shutdownsLeft == 0 && c.busyCount == 0; });
  }
  // Sessions accepted before the acceptor closed may have joined since the snapshot.
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (auto& [ptr, weak] : c.sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  auto remaining = endEach(c, live, &ServerSession::forceClose);
  live.clear();
  {
    std::unique_lock<std::mutex> lock(c.mu);
    c.cv.wait_for(lock, kCloseWait, [&remaining] { return *remaining == 0; });
  }
  listenerClosed.wait_for(kCloseWait);
  // Shared threads go on serving others; the server's own end here, so that no handler of this
  // server runs after stop().
  if (c.own) c.own->stop();
  std::lock_guard<std::mutex> lock(c.mu);
  c.running = false;
}

std::uint64_t BeastServer::connectionsAccepted() const { return core<Core>().accepted.load(); }

std::size_t BeastServer::openConnections() const {
  Core& c = core<Core>();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.sessions.size();
}

std::size_t BeastServer::channelQueuedBytesHighWater() const {
  return core<Core>().channelQueuedHighWater.load();
}

std::uint64_t BeastServer::connectionsRefused() const {
  Core& c = core<Core>();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.refused;
}

}  // namespace kshard::http
