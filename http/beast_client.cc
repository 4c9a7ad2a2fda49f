#include "http/beast_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "http/internal/beast_message.h"
#include "http/internal/beast_stream.h"
#include "http/internal/io_threads_impl.h"
#include "http/internal/origin.h"
#include "http/internal/tls_context.h"

namespace kshard::http {

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeaderLimit = 64 * 1024;
// A stream stops reading from the socket while this much is waiting for read(): a slow consumer
// slows the server down (TCP flow control) instead of growing memory.
constexpr std::size_t kMaxStreamBuffered = 1u << 20;
// How long the destructor of a client on shared threads waits for the callbacks of the requests it
// aborted (they run at once unless a callback blocks, which callbacks must not).
constexpr std::chrono::seconds kAbortWait{5};

struct Conn {
  Conn(std::size_t l, net::any_io_executor e, ssl::context* tls)
      : loop(l),
        exec(e),
        stream(tls ? AnyStream(beast::tcp_stream(e), *tls) : AnyStream(beast::tcp_stream(e))),
        watchdog(e) {
    buffer.reserve(kReadBufferBytes);
  }
  const std::size_t loop;  // of the I/O threads, whose idle list it returns to
  net::any_io_executor exec;
  AnyStream stream;
  beast::flat_buffer buffer;
  // An exchange's deadline: past it the connection closes and the exchange fails with a timeout.
  // (Connecting and the TLS handshake use the stream's own timer, once per connection.)
  Watchdog watchdog;
  bool timedOut = false;
  bool reused = false;
  // Plain connections (not TLS) learn that the server sent something by a wait for readability,
  // then read what came at once: an exchange arms it before it writes its request, and after the
  // response it stays armed while the connection is pooled, where it firing means the server
  // closed the connection or sent bytes nobody asked for (no check per reuse). Strand only.
  bool watching = false;              // the wait is pending
  bool readable = false;              // it completed, and nobody has read since
  UniqueFunction<void()> onReadable;  // the exchange waiting for its response, if any
  // The client's core, for the wait's handler to drop the connection from the pool. Kept here,
  // not in the handler, so that arming the wait per exchange copies no reference count that
  // every I/O thread writes.
  std::weak_ptr<BeastClient::Core> owner;
};

// Something in flight that the client's destruction must end. Tracked in its loop's list of
// what is in flight (Core::track): the links live here, so tracking allocates nothing. One that
// is destroyed while still tracked (its handlers dropped unrun, as when its threads stop first)
// must untrack itself in its destructor, or the list would keep a dangling pointer.
class Abortable {
 public:
  virtual ~Abortable() = default;
  virtual void abort() = 0;

  // Core's links, under the loop's mutex: the neighbours in the list and the owner to lock.
  // isTracked is written only by this one's own track and untrack, so its destructor may read it.
  Abortable* prevTracked = nullptr;
  Abortable* nextTracked = nullptr;
  std::weak_ptr<Abortable> tracked;
  bool isTracked = false;
};

enum class Phase { kConnect, kHandshake, kWrite, kRead };

std::string_view phaseText(Phase p) {
  switch (p) {
    case Phase::kConnect:
      return "connecting";
    case Phase::kHandshake:
      return "TLS handshake";
    case Phase::kWrite:
      return "sending the request";
    case Phase::kRead:
      return "reading the response";
  }
  return "";
}

bool isTlsError(const beast::error_code& ec) {
  return ec.category() == net::error::get_ssl_category() ||
         ec.category() == ssl::error::get_stream_category();
}

long long millis(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

}  // namespace

struct BeastClient::Core : std::enable_shared_from_this<BeastClient::Core> {
  Core(ClientOptions o, Origin parsed)
      : options(std::move(o)),
        origin(std::move(parsed)),
        verifyName(options.tls.serverName.empty() ? this->origin.host : options.tls.serverName) {
    if (options.ioThreads == nullptr) {
      own = std::make_unique<IoThreads>(
          IoThreadsOptions{options.threads, IoThreadsOptions::Model::kSharedContext, {}});
    }
    for (std::size_t i = 0; i < io().loops(); ++i) loops.push_back(std::make_unique<Loop>());
  }

  IoThreads::Impl& io() { return own ? own->impl() : options.ioThreads->impl(); }
  // What a handler holds to keep the core alive: needed with shared threads, which may run an
  // exchange's last handlers after the client is gone. With its own threads the core outlives
  // every handler (the client's destructor runs them all), and holding it would be a cycle.
  std::shared_ptr<Core> keepAlive() { return own ? nullptr : shared_from_this(); }

  // An idle connection of loop `loop` (or, with `anyLoop`, of any loop, `loop`'s first), or null.
  std::shared_ptr<Conn> takeIdle(std::size_t loop, bool anyLoop);
  void putIdle(std::shared_ptr<Conn> conn);
  // Closes `conn` if it is pooled (its wait for readability fired there). On its strand.
  void dropIdle(const std::shared_ptr<Conn>& conn);
  // Arms `conn`'s wait for readability (Conn::watching), unless it is pending. On its strand.
  void watch(const std::shared_ptr<Conn>& conn);
  std::size_t idleCount();
  std::shared_ptr<Conn> newConn(std::size_t loop, net::any_io_executor exec) {
    auto conn = std::make_shared<Conn>(loop, exec, tls ? &*tls : nullptr);
    conn->owner = weak_from_this();
    conn->watchdog.onExpire([weak = std::weak_ptr<Conn>(conn)] {
      if (auto c = weak.lock()) {
        c->timedOut = true;
        c->stream.close();
      }
    });
    return conn;
  }
  // Something in flight on loop `loop`, which the client's destruction must end. False when the
  // client is closing.
  bool track(std::size_t loop, Abortable* a, std::weak_ptr<Abortable> weak) {
    Loop& l = *loops[loop];
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.closing) return false;
    a->tracked = std::move(weak);
    a->isTracked = true;
    a->prevTracked = nullptr;
    a->nextTracked = l.inflight;
    if (l.inflight != nullptr) l.inflight->prevTracked = a;
    l.inflight = a;
    return true;
  }
  void untrack(std::size_t loop, Abortable* a) {
    Loop& l = *loops[loop];
    std::lock_guard<std::mutex> lock(l.mu);
    if (!a->isTracked) return;
    if (a->prevTracked != nullptr) {
      a->prevTracked->nextTracked = a->nextTracked;
    } else {
      l.inflight = a->nextTracked;
    }
    if (a->nextTracked != nullptr) a->nextTracked->prevTracked = a->prevTracked;
    a->prevTracked = a->nextTracked = nullptr;
    a->isTracked = false;
    if (l.inflight == nullptr) l.drained.notify_all();
  }
  bool isClosing(std::size_t loop) {
    Loop& l = *loops[loop];
    std::lock_guard<std::mutex> lock(l.mu);
    return l.closing;
  }

  // Connects `conn` (TCP, then TLS when the origin is https) and calls `done` on its strand.
  void establish(std::shared_ptr<Conn> conn, Clock::time_point deadline,
                 std::function<void(beast::error_code, Phase)> done);

  const ClientOptions options;
  const Origin origin;
  const std::string verifyName;
  std::optional<ssl::context> tls;

  struct Idle {
    std::shared_ptr<Conn> conn;
    Clock::time_point since;
  };
  // What the client keeps per loop of the I/O threads: an exchange started on a thread of the
  // set reuses a connection of that thread's loop and completes there, and the threads do not
  // contend for one lock on every request.
  struct Loop {
    std::mutex mu;
    std::condition_variable drained;  // inflight became empty
    std::vector<Idle> idle;
    Abortable* inflight = nullptr;  // the first of a list linked through Abortable
    bool closing = false;
  };
  std::vector<std::unique_ptr<Loop>> loops;

  // The client's own threads, when it was given none to share (ClientOptions::ioThreads).
  // Declared last: destroyed first, while what its leftover handlers reference still exists.
  std::unique_ptr<IoThreads> own;
};

namespace {

// True when a pooled TLS connection still looks usable: no FIN or stray bytes from the server.
// (A plain connection's wait for readability tells its pool the same when it happens, so a plain
// one needs no check per reuse.)
bool looksAlive(Conn& conn) {
  if (!conn.stream.isTls()) return true;
  char byte = 0;
  const ssize_t n = ::recv(conn.stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
  // Pending bytes can be a session ticket. Zero is an orderly close.
  return n > 0;
}

void closeOnStrand(const std::shared_ptr<Conn>& conn) {
  net::post(conn->exec, [conn] { conn->stream.close(); });
}

}  // namespace

std::shared_ptr<Conn> BeastClient::Core::takeIdle(std::size_t loop, bool anyLoop) {
  const auto now = Clock::now();
  const std::size_t lists = anyLoop ? loops.size() : 1;
  for (std::size_t i = 0; i < lists; ++i) {
    Loop& l = *loops[(loop + i) % loops.size()];
    std::lock_guard<std::mutex> lock(l.mu);
    std::vector<Idle>& list = l.idle;
    while (!list.empty()) {
      Idle entry = std::move(list.back());
      list.pop_back();
      if (now - entry.since > options.idleTimeout || !looksAlive(*entry.conn)) {
        closeOnStrand(entry.conn);
        continue;
      }
      entry.conn->reused = true;
      return std::move(entry.conn);
    }
  }
  return nullptr;
}

void BeastClient::Core::putIdle(std::shared_ptr<Conn> conn) {
  Loop& l = *loops[conn->loop];
  std::lock_guard<std::mutex> lock(l.mu);
  std::vector<Idle>& list = l.idle;
  if (l.closing || list.size() >= options.maxConnections) {
    closeOnStrand(conn);
    return;
  }
  list.push_back(Idle{std::move(conn), Clock::now()});
}

void BeastClient::Core::dropIdle(const std::shared_ptr<Conn>& conn) {
  {
    Loop& l = *loops[conn->loop];
    std::lock_guard<std::mutex> lock(l.mu);
    auto it = std::find_if(l.idle.begin(), l.idle.end(),
                           [&conn](const Idle& entry) { return entry.conn == conn; });
    if (it == l.idle.end()) return;  // taken by an exchange, which sees Conn::readable
    l.idle.erase(it);
  }
  conn->stream.close();
}

void BeastClient::Core::watch(const std::shared_ptr<Conn>& conn) {
  if (conn->watching || conn->stream.isTls()) return;
  conn->watching = true;
  auto fired = [conn](const beast::error_code&) {
    // Whatever came (bytes, a close, an error), the next read reports it.
    conn->watching = false;
    conn->readable = true;
    if (conn->onReadable) {
      UniqueFunction<void()> notify = std::move(conn->onReadable);
      conn->onReadable = nullptr;
      notify();
    } else if (auto core = conn->owner.lock()) {
      core->dropIdle(conn);
    }
  };
  conn->stream.socket().async_wait(tcp::socket::wait_read, std::move(fired));
}

std::size_t BeastClient::Core::idleCount() {
  std::size_t n = 0;
  for (auto& l : loops) {
    std::lock_guard<std::mutex> lock(l->mu);
    n += l->idle.size();
  }
  return n;
}

void BeastClient::Core::establish(std::shared_ptr<Conn> conn, Clock::time_point deadline,
                                  std::function<void(beast::error_code, Phase)> done) {
  auto& tcpStream = conn->stream.tcp();
  tcpStream.expires_at(std::min(deadline, Clock::now() + options.connectTimeout));
  auto onConnected = [this, conn, deadline, done](const beast::error_code& ec) {
    if (ec) {
      done(ec, Phase::kConnect);
      return;
    }
    beast::error_code ignored;
    conn->stream.socket().set_option(tcp::no_delay(true), ignored);
    if (!conn->stream.isTls()) {
      done({}, Phase::kConnect);
      return;
    }
    auto& tlsStream = conn->stream.tls();
    beast::error_code addressError;
    net::ip::make_address(verifyName, addressError);
    // SNI carries host names only (RFC 6066); an IP address is still verified below.
    std::string sniName = verifyName;  // OpenSSL's macro takes a non-const pointer
    if (addressError && !SSL_set_tlsext_host_name(tlsStream.native_handle(), sniName.data())) {
      done(beast::error_code(static_cast<int>(::ERR_get_error()), net::error::get_ssl_category()),
           Phase::kHandshake);
      return;
    }
    if (options.tls.insecureSkipVerify) {
      tlsStream.set_verify_mode(ssl::verify_none);
    } else {
      tlsStream.set_verify_mode(ssl::verify_peer);
      tlsStream.set_verify_callback(ssl::host_name_verification(verifyName));
    }
    conn->stream.tcp().expires_at(deadline);
    tlsStream.async_handshake(ssl::stream_base::client,
                              [done](const beast::error_code& e) { done(e, Phase::kHandshake); });
  };
  beast::error_code addressError;
  const net::ip::address address = net::ip::make_address(origin.host, addressError);
  if (!addressError) {
    tcpStream.async_connect(tcp::endpoint(address, origin.port), onConnected);
    return;
  }
  auto resolver = std::make_shared<tcp::resolver>(conn->exec);
  resolver->async_resolve(
      origin.host, std::to_string(origin.port),
      [conn, resolver, onConnected, done](const beast::error_code& ec,
                                          const tcp::resolver::results_type& results) {
        if (ec) {
          done(ec, Phase::kConnect);
          return;
        }
        conn->stream.tcp().async_connect(
            results,
            [onConnected](const beast::error_code& e, const tcp::endpoint&) { onConnected(e); });
      });
}

namespace {

// The request line and fields of `r` as this client sends them (http/internal/beast_message.h).
std::string wireHead(const BeastClient::Core& core, const Request& r) {
  return requestHead(r, core.origin.hostHeader, core.options.userAgent);
}

// "METHOD url" of a request, from its wire head, for error messages: built only when one is
// needed, not for every request.
std::string describeRequest(const BeastClient::Core& core, std::string_view wireHead) {
  const std::string_view line = wireHead.substr(0, wireHead.find("\r\n"));
  const std::size_t space = line.find(' ');
  const std::size_t version = line.rfind(' ');
  std::string out(line.substr(0, space));
  out += ' ';
  out += core.origin.url;
  if (space != std::string_view::npos && version > space) {
    out += line.substr(space + 1, version - space - 1);
  }
  return out;
}

Headers toHeaders(const bhttp::fields& fields) {
  Headers h;
  for (const auto& f : fields) h.add(std::string(f.name_string()), std::string(f.value()));
  return h;
}

bool idempotent(Method m) {
  return m == Method::kGet || m == Method::kHead || m == Method::kPut || m == Method::kDelete ||
         m == Method::kOptions;
}

// Maps a transport error to kshard's Status vocabulary with a message naming the request.
Status transportError(const BeastClient::Core& core, const std::string& what,
                      const beast::error_code& ec, Phase phase, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout) {
    if (phase == Phase::kConnect || phase == Phase::kHandshake) {
      // Nothing was sent: Unavailable, like a refused connection, so that the caller may send the
      // request elsewhere (a pod killed with its network gone drops SYNs rather than refusing).
      return unavailable(
          what + ": " + std::string(phaseText(phase)) +
          (phase == Phase::kConnect ? ": no connection within " : ": not finished within ") +
          std::to_string(millis(std::min(timeout, core.options.connectTimeout))) + " ms");
    }
    return deadlineExceeded(what + ": no response within " + std::to_string(millis(timeout)) +
                            " ms");
  }
  if (ec == bhttp::error::body_limit) {
    return {StatusCode::kResourceExhausted, what + ": response body exceeds " +
                                                std::to_string(core.options.maxResponseBytes) +
                                                " bytes"};
  }
  // A TLS error means the session was not established as far as the server is concerned (with
  // TLS 1.3 a refused client certificate shows only at the first read): nothing reached it.
  if (isTlsError(ec)) return unavailable(what + ": TLS handshake failed: " + ec.message());
  if (phase == Phase::kConnect || phase == Phase::kHandshake) {
    return unavailable(what + ": " + std::string(phaseText(phase)) + ": " + ec.message());
  }
  // The request went out, at least in part, and the exchange broke: the server may have acted on
  // it. Unavailable would invite a retry that could apply it twice.
  return outcomeUnknown(what + ": " + std::string(phaseText(phase)) + ": " + ec.message() +
                        " (the request may have been processed)");
}

// A request's body as the client sends it: its own, moved in, or one its sender keeps
// (Request::sharedBody), held until the exchange ends.
class OutgoingBody {
 public:
  explicit OutgoingBody(Request& r)
      : shared_(std::move(r.sharedBody)), own_(shared_ ? std::string() : std::move(r.body)) {}
  std::string_view view() const { return shared_ ? std::string_view(*shared_) : own_; }

 private:
  std::shared_ptr<const std::string> shared_;
  std::string own_;
};

// One request and its response, on a pooled or new connection.
class Exchange : public Abortable, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(BeastClient::Core& core, Request request, ResponseCallback done)
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

  BeastClient::Core& core_;
  const std::shared_ptr<BeastClient::Core> keepCore_;  // see Core::keepAlive
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

// A streaming response: the I/O side fills `pending_`, read() drains it.
class StreamCore : public Abortable, public std::enable_shared_from_this<StreamCore> {
 public:
  StreamCore(std::shared_ptr<BeastClient::Core> core, Request request)
      : core_(std::move(core)),
        timeout_(request.timeout.count() > 0 ? request.timeout : core_->options.requestTimeout),
        deadline_(Clock::now() + timeout_),
        wireHead_(wireHead(*core_, request)),
        body_(request),
        loop_(core_->io().pick()),
        exec_(core_->io().connectionExecutor(loop_)) {}

  ~StreamCore() override {
    if (isTracked) core_->untrack(loop_, this);
  }

  // Blocks until the status and headers arrived or the request failed.
  Status open() {
    if (!core_->track(loop_, this, weak_from_this())) {
      return cancelled(what() + ": the client is shutting down");
    }
    net::post(exec_, [self = shared_from_this()] { self->connect(); });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return headersDone_ || !error_.ok() || cancelled_; });
    if (headersDone_) return {};
    return error_.ok() ? cancelled(what() + ": cancelled") : error_;
  }

  int status() const { return status_; }
  const Headers& headers() const { return headers_; }

  StatusOr<std::string> read(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout,
                 [this] { return !pending_.empty() || eof_ || !error_.ok() || cancelled_; });
    if (cancelled_) return cancelled(what() + ": stream cancelled");
    if (!pending_.empty()) {
      std::string out;
      out.swap(pending_);
      if (paused_) {
        paused_ = false;
        net::post(exec_, [self = shared_from_this()] { self->readBody(); });
      }
      return out;
    }
    if (!error_.ok()) return error_;
    if (eof_) return std::string();
    return deadlineExceeded(what() + ": no data within " + std::to_string(millis(timeout)) + " ms");
  }

  void cancel() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
    }
    cv_.notify_all();
    // After the client shut down its I/O threads are gone and the connection is already closed.
    if (core_->isClosing(loop_)) return;
    net::post(exec_, [self = shared_from_this()] { self->closeConn(); });
  }

  void abort() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) error_ = cancelled(what() + ": the client is shutting down");
    }
    cv_.notify_all();
    net::post(exec_, [self = shared_from_this()] { self->closeConn(); });
  }

 private:
  void closeConn() {
    if (conn_) conn_->stream.close();
    core_->untrack(loop_, this);
  }

  bool stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_ || !error_.ok();
  }

  void fail(Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) error_ = std::move(status);
    }
    cv_.notify_all();
    closeConn();
  }

  void connect() {
    if (stopped()) return;
    conn_ = core_->newConn(loop_, exec_);
    core_->establish(
        conn_, deadline_, [self = shared_from_this()](beast::error_code ec, Phase phase) {
          if (self->stopped()) return;
          if (ec) {
            self->fail(transportError(*self->core_, self->what(), ec, phase, self->timeout_));
            return;
          }
          self->write();
        });
  }

  void write() {
    // Until the headers are in, the connection's watchdog keeps the deadline.
    conn_->stream.tcp().expires_never();
    conn_->watchdog.expiresAt(deadline_);
    asyncWriteMessage(conn_->stream, wireHead_, body_.view(),
                      [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                        if (self->stopped()) return;
                        if (ec) {
                          self->failIo(ec, Phase::kWrite);
                          return;
                        }
                        self->readHeader();
                      });
  }

  // A failed write or header read; past the deadline, whatever the operation reported, it is the
  // watchdog that closed the connection.
  void failIo(beast::error_code ec, Phase phase) {
    if (conn_->timedOut) ec = beast::error::timeout;
    fail(transportError(*core_, what(), ec, phase, timeout_));
  }

  void readHeader() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // a watch runs for hours
    conn_->stream.visit([this](auto& s) {
      bhttp::async_read_header(
          s, conn_->buffer, *parser_,
          [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
            if (self->stopped()) return;
            if (ec) {
              self->failIo(ec, Phase::kRead);
              return;
            }
            self->onHeader();
          });
    });
  }

  void onHeader() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = static_cast<int>(parser_->get().result_int());
      headers_ = toHeaders(parser_->get());
      headersDone_ = true;
      eof_ = parser_->is_done();
    }
    cv_.notify_all();
    // The body has no deadline: read() has its own timeout, and cancel() ends it.
    conn_->watchdog.never();
    readBody();
  }

  void readBody() {
    if (stopped() || parser_->is_done()) return;
    parser_->get().body().data = buf_.data();
    parser_->get().body().size = buf_.size();
    conn_->stream.visit([this](auto& s) {
      bhttp::async_read_some(
          s, conn_->buffer, *parser_,
          [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onBody(ec); });
    });
  }

  void onBody(beast::error_code ec) {
    if (ec == bhttp::error::need_buffer) ec = {};
    const std::size_t got = buf_.size() - parser_->get().body().size;
    bool more = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      pending_.append(buf_.data(), got);
      if (ec) {
        if (error_.ok()) {
          error_ = (ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream)
                       ? unavailable(what() + ": the stream ended before the body was complete")
                       : transportError(*core_, what(), ec, Phase::kRead, timeout_);
        }
      } else if (parser_->is_done()) {
        eof_ = true;
      } else if (pending_.size() >= kMaxStreamBuffered) {
        paused_ = true;
      } else {
        more = true;
      }
    }
    cv_.notify_all();
    if (more) {
      readBody();
    } else if (ec || eof_) {
      closeConn();
    }
  }

  const std::shared_ptr<BeastClient::Core> core_;
  const std::chrono::milliseconds timeout_;
  const Clock::time_point deadline_;
  std::string what() const { return describeRequest(*core_, wireHead_); }

  const std::string wireHead_;  // the request line and fields
  const OutgoingBody body_;
  const std::size_t loop_;
  const net::any_io_executor exec_;
  std::shared_ptr<Conn> conn_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  std::array<char, 16 * 1024> buf_{};

  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool headersDone_ = false;
  bool eof_ = false;
  bool paused_ = false;
  bool cancelled_ = false;
  Status error_;
  int status_ = 0;
  Headers headers_;
};

class BeastResponseStream : public ResponseStream {
 public:
  explicit BeastResponseStream(std::shared_ptr<StreamCore> core) : core_(std::move(core)) {}
  ~BeastResponseStream() override { core_->cancel(); }
  int status() const override { return core_->status(); }
  const Headers& headers() const override { return core_->headers(); }
  StatusOr<std::string> read(std::chrono::milliseconds timeout) override {
    return core_->read(timeout);
  }
  void cancel() override { core_->cancel(); }

 private:
  std::shared_ptr<StreamCore> core_;
};

}  // namespace

StatusOr<std::unique_ptr<BeastClient>> BeastClient::create(ClientOptions options) {
  StatusOr<Origin> origin = parseOrigin(options.baseUrl);
  if (!origin.ok()) return origin.status();
  auto core = std::make_shared<Core>(std::move(options), std::move(*origin));
  if (core->origin.tls) {
    core->tls.emplace(ssl::context::tls_client);
    if (Status s = configureClientTls(*core->tls, core->options.tls); !s.ok()) {
      return s.withContext("TLS for " + core->origin.url);
    }
  }
  return std::unique_ptr<BeastClient>(new BeastClient(std::move(core)));
}

BeastClient::BeastClient(std::shared_ptr<Core> core) : core_(std::move(core)) {}

BeastClient::~BeastClient() {
  Core& c = *core_;
  std::vector<std::shared_ptr<Abortable>> live;
  std::vector<Core::Idle> idle;
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

std::size_t BeastClient::idleConnections() const { return core_->idleCount(); }

void BeastClient::send(Request request, ResponseCallback done) {
  auto exchange = std::make_shared<Exchange>(*core_, std::move(request), std::move(done));
  Exchange& e = *exchange;
  e.start(std::move(exchange));
}

StatusOr<std::unique_ptr<ResponseStream>> BeastClient::openStream(Request request) {
  auto stream = std::make_shared<StreamCore>(core_, std::move(request));
  if (Status s = stream->open(); !s.ok()) {
    stream->cancel();
    return s;
  }
  return std::unique_ptr<ResponseStream>(std::make_unique<BeastResponseStream>(std::move(stream)));
}

}  // namespace kshard::http
