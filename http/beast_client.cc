#include "http/beast_client.h"

#include <algorithm>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "http/internal/beast_client_core.h"
#include "http/internal/beast_message.h"
#include "http/internal/tls_context.h"

namespace kshard::http {

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary
namespace bhttp = boost::beast::http;

// How long the destructor of a client on shared threads waits for the callbacks of the requests it
// aborted (they run at once unless a callback blocks, which callbacks must not).
constexpr std::chrono::seconds kAbortWait{5};

bool idempotent(Method m) {
  return m == Method::kGet || m == Method::kHead || m == Method::kPut || m == Method::kDelete ||
         m == Method::kOptions;
}

// One request and its response, on a pooled or new connection.
class Exchange : public Abortable, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(BeastClientCore& core, Request request, ResponseCallback done)
      : core_(core),
        keepCore_(core.keepAlive()),
        timeout_(request.timeout.count() > 0 ? request.timeout : core.options.requestTimeout),
        deadline_(Clock::now() + timeout_),
        idempotent_(idempotent(request.method)),
        head_(request.method == Method::kHead),
        wireHead_(wireHead(core, request)),
        body_(request),
        done_(std::move(done)) {}

  ~Exchange() override {
    if (isTracked) core_.untrack(loop_, this);
  }

  // `self` is this exchange's reference, handed on to its first handler.
  void start(std::shared_ptr<Exchange> self) {
    // Sent from a thread of the set, the exchange stays on that thread's loop: a connection of
    // another loop would complete on another thread. From elsewhere, any idle connection will do.
    loop_ = core_.io().pick();
    conn_ = core_.takeIdle(loop_, !core_.io().runsInThisThread());
    if (conn_ != nullptr) {
      loop_ = conn_->loop;
      exec_ = conn_->exec;
    } else {
      exec_ = core_.io().connectionExecutor(loop_);
    }
    // exec_ is set before the exchange becomes visible to the client's destructor, which posts
    // abort() to it.
    if (!core_.track(loop_, this, weak_from_this())) {
      if (conn_ != nullptr) closeOnStrand(conn_);
      finish(cancelled(what() + ": the client is shutting down"));
      return;
    }
    // Dispatched: started from a handler on the same loop (a forward), the request is written
    // at once, on this thread.
    if (conn_ != nullptr) {
      net::dispatch(exec_, [self = std::move(self)] { self->write(); });
    } else {
      net::dispatch(exec_, [self = std::move(self)] { self->connect(); });
    }
  }

  void abort() override {
    net::post(exec_, [self = shared_from_this()] {
      if (self->finished_) return;
      if (self->conn_) self->abandonConn();
      self->finish(cancelled(self->what() + ": the client is shutting down"));
    });
  }

 private:
  void connect() {
    written_ = false;
    conn_ = core_.newConn(loop_, exec_);
    core_.establish(conn_, deadline_,
                    [self = shared_from_this()](beast::error_code ec, Phase phase) {
                      if (self->finished_) return;
                      if (ec) {
                        self->fail(ec, phase);
                        return;
                      }
                      // From here on the watchdog keeps the deadline.
                      self->conn_->stream.tcp().expires_never();
                      self->write();
                    });
  }

  void write() {
    if (finished_) return;
    if (conn_->readable) {
      // The pooled connection's wait fired after the exchange took it, before its handler could
      // drop it: the server closed it or sent something. Nothing was written yet, so any request
      // may go on a new connection.
      abandonConn();
      connect();
      return;
    }
    conn_->watchdog.expiresAt(deadline_);
    // Armed before the request goes out, the wait cannot miss the response: waiting for it only
    // after the write could find its arrival already reported, and wait forever.
    if (!conn_->stream.isTls()) {
      conn_->onReadable = [self = shared_from_this()] { self->onReadable(); };
      core_.watch(conn_);
    }
    asyncWriteMessage(conn_->stream, wireHead_, body_.view(),
                      [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                        if (self->finished_) return;
                        if (ec) {
                          self->fail(ec, Phase::kWrite);
                          return;
                        }
                        self->written_ = true;
                        // TLS connections are not watched: they read at once.
                        if (self->conn_->readable || self->conn_->stream.isTls()) self->read();
                      });
  }

  // The server sent something: the response, unless the request is still being written (a
  // server may answer early, then the write's end starts the read).
  void onReadable() {
    if (finished_ || !written_) return;
    read();
  }

  void read() {
    conn_->readable = false;
    conn_->onReadable = nullptr;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(core_.options.maxResponseBytes);
    if (head_) parser_->skip(true);
    parser_->eager(true);
    // A plain connection's wait said bytes are there: they are read at once.
    const bool readable = !conn_->stream.isTls();
    if (readable && !conn_->stream.socket().non_blocking()) {
      beast::error_code ec;
      conn_->stream.socket().non_blocking(true, ec);
      if (ec) {
        fail(ec, Phase::kRead);
        return;
      }
    }
    asyncReadUntil(
        conn_->stream, conn_->buffer, *parser_,
        [this](const auto& p) { return p.is_done() || (p.is_header_done() && declaredTooLarge()); },
        [self = shared_from_this()](const beast::error_code& ec) { self->onRead(ec); }, readable);
  }

  // Boost 1.74's parser does not apply body_limit to a response's Content-Length, so the declared
  // length is checked as soon as the header is in, before the body is waited for.
  bool declaredTooLarge() const {
    const boost::optional<std::uint64_t> length = parser_->content_length();
    return length && *length > core_.options.maxResponseBytes;
  }

  // Closes the exchange's connection, whose wait (if pending) no longer reports to it.
  void abandonConn() {
    conn_->onReadable = nullptr;
    conn_->stream.close();
  }

  void onRead(const beast::error_code& ec) {
    if (finished_) return;
    if (ec || declaredTooLarge()) {
      fail(ec ? ec : bhttp::error::body_limit, Phase::kRead);
      return;
    }
    Response response = std::move(parser_->get());
    // Bytes after the response were never asked for: the connection is out of step.
    if (parser_->keep_alive() && !parser_->need_eof() && conn_->buffer.size() == 0) {
      conn_->watchdog.never();
      // Pooled first, so that a request the callback sends on this thread may reuse it; its wait
      // is armed after the callback, which is the response's way back (the wait is a system
      // call). Everything on the connection runs on this thread, and an exchange that takes it
      // in between arms the wait itself.
      std::shared_ptr<Conn> pooled = conn_;
      core_.putIdle(std::move(conn_));
      finish(std::move(response));
      core_.watch(pooled);
      return;
    }
    conn_->stream.close();
    finish(std::move(response));
  }

  void fail(beast::error_code ec, Phase phase) {
    // The watchdog closed the connection: whatever the operation reported, the deadline passed.
    if (conn_->timedOut) ec = beast::error::timeout;
    const bool nothingReceived = phase != Phase::kRead || !parser_ || !parser_->got_some();
    // A server may close an idle keep-alive connection just as we reuse it; the request never
    // reached a handler, so an idempotent one goes again, once, on a fresh connection.
    if (conn_->reused && !retried_ && idempotent_ && nothingReceived &&
        ec != beast::error::timeout && ec != bhttp::error::body_limit) {
      retried_ = true;
      abandonConn();
      parser_.reset();
      connect();
      return;
    }
    abandonConn();
    finish(transportError(core_, what(), ec, phase, timeout_));
  }

  void finish(StatusOr<Response>&& result) {
    if (finished_) return;
    finished_ = true;
    ResponseCallback done = std::move(done_);
    done(std::move(result));
    // Untracked after the callback, so that the client's destructor returns after it.
    core_.untrack(loop_, this);
  }

  BeastClientCore& core_;
  const std::shared_ptr<BeastClientCore> keepCore_;  // see Core::keepAlive
  const std::chrono::milliseconds timeout_;
  const Clock::time_point deadline_;
  const bool idempotent_;
  const bool head_;
  std::string what() const { return describeRequest(core_, wireHead_); }

  const std::string wireHead_;  // the request line and fields
  const OutgoingBody body_;
  ResponseCallback done_;
  std::size_t loop_ = 0;
  net::any_io_executor exec_;
  std::shared_ptr<Conn> conn_;
  std::optional<MessageParser<false>> parser_;
  bool written_ = false;  // the request went out on conn_
  bool retried_ = false;
  bool finished_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> makeBeastClient(ClientOptions options) {
  StatusOr<Origin> origin = parseOrigin(options.baseUrl);
  if (!origin.ok()) return origin.status();
  auto core = std::make_shared<BeastClientCore>(std::move(options), std::move(*origin));
  if (core->origin.tls) {
    core->tls.emplace(ssl::context::tls_client);
    if (Status s = configureClientTls(*core->tls, core->options.tls); !s.ok()) {
      return s.withContext("TLS for " + core->origin.url);
    }
  }
  return std::unique_ptr<Client>(std::make_unique<BeastClient>(std::move(core)));
}

void BeastClientCore::close() {
  BeastClientCore& c = *this;
  std::vector<std::shared_ptr<Abortable>> live;
  std::vector<Idle> idle;
  for (auto& l : c.loops) {
    std::lock_guard<std::mutex> lock(l->mu);
    l->closing = true;
    for (Abortable* a = l->inflight; a != nullptr; a = a->nextTracked) {
      if (auto locked = a->tracked.lock()) live.push_back(std::move(locked));
    }
    for (auto& entry : l->idle) idle.push_back(std::move(entry));
    l->idle.clear();
  }
  for (auto& a : live) a->abort();
  for (auto& entry : idle) closeOnStrand(entry.conn);
  live.clear();
  idle.clear();
  if (c.own) {
    // Every operation now ends (aborted sockets complete at once), so the loop runs out of work.
    c.own->impl().drain();
    return;
  }
  // Shared threads: wait for the callbacks of the aborted requests, unless this is one of those
  // threads (a callback that drops a client), which has to go on to run them.
  if (c.io().runsInThisThread()) return;
  const auto giveUp = Clock::now() + kAbortWait;
  for (auto& l : c.loops) {
    std::unique_lock<std::mutex> lock(l->mu);
    l->drained.wait_until(lock, giveUp, [&l] { return l->inflight == nullptr; });
  }
}

void BeastClientCore::send(Request request, ResponseCallback done) {
  auto exchange = std::make_shared<Exchange>(*this, std::move(request), std::move(done));
  Exchange& e = *exchange;
  e.start(std::move(exchange));
}

}  // namespace kshard::http
