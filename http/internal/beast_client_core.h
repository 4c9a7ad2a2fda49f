// Internal to BeastClient (beast_client.cc, beast_client_pool.cc, beast_client_stream.cc): the
// client's core with its pool of connections per loop, what is in flight, and what an exchange
// and a stream share (the request's wire head and body, the errors of the transport). Never
// include it from a public header.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/beast_client.h"
#include "http/internal/beast_stream.h"
#include "http/internal/core_client.h"
#include "http/internal/io_threads_impl.h"
#include "http/internal/origin.h"

namespace kshard::http {

struct BeastClientCore;
// What makeBeastClient makes.
using BeastClient = CoreClient<BeastClientCore>;

namespace beast_detail {

using Clock = std::chrono::steady_clock;

inline constexpr std::size_t kHeaderLimit = 64 * 1024;

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
  std::weak_ptr<BeastClientCore> owner;
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

inline long long millis(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

}  // namespace beast_detail

struct BeastClientCore : std::enable_shared_from_this<BeastClientCore> {
  using Abortable = beast_detail::Abortable;
  using Clock = beast_detail::Clock;
  using Conn = beast_detail::Conn;
  using Phase = beast_detail::Phase;

  BeastClientCore(ClientOptions o, Origin parsed)
      : options(std::move(o)),
        origin(std::move(parsed)),
        verifyName(options.tls.serverName.empty() ? this->origin.host : options.tls.serverName) {
    if (options.ioThreads == nullptr) {
      own = std::make_unique<IoThreads>(
          IoThreadsOptions{options.threads, IoThreadsOptions::Model::kSharedContext, {}});
    }
    for (std::size_t i = 0; i < io().loops(); ++i) loops.push_back(std::make_unique<Loop>());
  }

  // The client's work (CoreClient): send() in beast_client.cc, openStream() in
  // beast_client_stream.cc; close() cancels what is in flight and fails requests with Cancelled.
  void send(Request request, ResponseCallback done);
  StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request);
  void close();

  IoThreads::Impl& io() { return own ? own->impl() : options.ioThreads->impl(); }
  // What a handler holds to keep the core alive: needed with shared threads, which may run an
  // exchange's last handlers after the client is gone. With its own threads the core outlives
  // every handler (the client's destructor runs them all), and holding it would be a cycle.
  std::shared_ptr<BeastClientCore> keepAlive() { return own ? nullptr : shared_from_this(); }

  // An idle connection of loop `loop` (or, with `anyLoop`, of any loop, `loop`'s first), or null.
  std::shared_ptr<Conn> takeIdle(std::size_t loop, bool anyLoop);
  void putIdle(std::shared_ptr<Conn> conn);
  // Closes `conn` if it is pooled (its wait for readability fired there). On its strand.
  void dropIdle(const std::shared_ptr<Conn>& conn);
  // Arms `conn`'s wait for readability (Conn::watching), unless it is pending. On its strand.
  void watch(const std::shared_ptr<Conn>& conn);
  std::size_t idleCount();
  std::shared_ptr<Conn> newConn(std::size_t loop, beast_detail::net::any_io_executor exec) {
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
                 std::function<void(beast_detail::beast::error_code, Phase)> done);

  const ClientOptions options;
  const Origin origin;
  const std::string verifyName;
  std::optional<beast_detail::ssl::context> tls;

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

namespace beast_detail {

// Closes `conn` on its strand.
void closeOnStrand(const std::shared_ptr<Conn>& conn);

// The request line and fields of `r` as this client sends them (http/internal/beast_message.h).
std::string wireHead(const BeastClientCore& core, const Request& r);

// "METHOD url" of a request, from its wire head, for error messages: built only when one is
// needed, not for every request.
std::string describeRequest(const BeastClientCore& core, std::string_view wireHead);

// Maps a transport error to kshard's Status vocabulary with a message naming the request.
Status transportError(const BeastClientCore& core, const std::string& what,
                      const beast::error_code& ec, Phase phase, std::chrono::milliseconds timeout);

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

}  // namespace beast_detail

}  // namespace kshard::http
