#include "http/beast_server.h"

#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "base/log_throttle.h"
#include "http/channel.h"
#include "http/internal/beast_message.h"
#include "http/internal/beast_stream.h"
#include "http/internal/channel_flow.h"
#include "http/internal/channel_frame_reader.h"
#include "http/internal/io_threads_impl.h"
#include "http/internal/tls_context.h"
#include "http/router.h"

namespace kshard::http {

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary
namespace bhttp = boost::beast::http;

constexpr std::size_t kHeaderLimit = 64 * 1024;
// After answering a request we will not read (413), the peer may still be sending its body:
// closing at once would make the kernel reset the connection and the peer could lose our answer.
// So we stop sending and drain what arrives for a short while first, as nginx's lingering close.
constexpr std::chrono::seconds kLingerTime{2};
// How long stop() waits for the I/O threads to carry out the final closes (and the listener's).
constexpr std::chrono::seconds kCloseWait{5};

bool isParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category();
}

class Session;

// Shared by every StreamWriter and the session it writes to: false once the stream can no longer
// carry data.
struct StreamState {
  std::atomic<bool> open{true};
};

}  // namespace

struct BeastServer::Core : std::enable_shared_from_this<BeastServer::Core> {
  explicit Core(ServerOptions o) : options(std::move(o)), router(options.logger) {
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
  void onAccept(const beast::error_code& ec, tcp::socket socket);
  // Takes a place for a connection from `peer`, within maxConnections and
  // maxConnectionsPerPeer; false (and logged, at most once per interval) when there is none.
  bool admit(const net::ip::address& peer);
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
  void forget(Session* s, const net::ip::address& peer, bool wasBusy) {
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

  const ServerOptions options;
  Router router;
  std::optional<ssl::context> tls;
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::size_t> channelQueuedHighWater{0};
  std::uint16_t port = 0;

  std::mutex mu;
  std::condition_variable cv;
  std::map<Session*, std::weak_ptr<Session>> sessions;
  std::map<net::ip::address, std::size_t> perPeer;  // open connections by address, when bounded
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
  net::any_io_executor acceptorExec;
  std::optional<tcp::acceptor> acceptor;
};

namespace {

// What a Responder or StreamWriter holds: the core first, so it is released last and the
// io_context outlives the session it may have to destroy.
struct SessionRef {
  std::shared_ptr<BeastServer::Core> core;
  std::shared_ptr<Session> session;
};

class Session : public std::enable_shared_from_this<Session>, public ResponseTarget {
 public:
  Session(BeastServer::Core& core, AnyStream stream, const tcp::endpoint& remote)
      : core_(core),
        keepCore_(core.keepAlive()),
        exec_(stream.tcp().get_executor()),
        stream_(std::move(stream)),
        peer_(remote.address()),
        remote_(formatEndpoint(remote)),
        watchdog_(exec_) {
    buffer_.reserve(kReadBufferBytes);
  }

  ~Session() {
    if (channel_) core_.noteChannelQueued(channel_->flow.queuedHighWater());
    core_.forget(this, peer_, busy_);
  }

  const net::any_io_executor& executor() const { return exec_; }

  void start() {
    net::dispatch(exec_, [self = shared_from_this()] { self->begin(); });
  }

  // Server stop: finish the request in progress, read no further one.
  void shutdown() {
    net::post(exec_, [self = shared_from_this()] {
      self->stopping_ = true;
      if (self->state_ == State::kReading || self->state_ == State::kHandshake) self->closeNow();
      if (self->state_ == State::kChannel) self->goAway();
    });
  }

  void forceClose(std::function<void()> done) {
    net::post(exec_, [self = shared_from_this(), done = std::move(done)] {
      self->closeNow();
      done();
    });
  }

  // ResponseTarget: a handler's Responder answers request `seq` through these, from any thread.
  // On a channel, `seq` is the request's frame id.
  void respond(std::uint64_t seq, Response&& response) override;
  bool canStream() const override { return !isChannel_.load(std::memory_order_relaxed); }
  std::unique_ptr<StreamWriter> startStream(std::uint64_t seq, int status,
                                            Headers headers) override;

  void answer(std::uint64_t seq, Response&& response);
  void beginStream(std::uint64_t seq, int status, Headers headers,
                   std::shared_ptr<StreamState> state);
  void streamWrite(std::uint64_t seq, std::string chunk);
  void streamFinish(std::uint64_t seq);
  void streamAbort(std::uint64_t seq);

 private:
  enum class State {
    kHandshake,
    kReading,
    kHandling,
    kWriting,
    kStreaming,
    kLingering,
    kChannel,  // upgraded: frames both ways until closed (http/channel.h)
    kClosed
  };

  void begin();
  void readHeader();
  // `self` is the reference the read's handler held, handed on from the header to the body to
  // the Responder, rather than taken anew at each step (an atomic compare-and-swap each).
  void onHeader(const beast::error_code& ec, std::shared_ptr<Session> self);
  void readBody(std::shared_ptr<Session> self);
  void onBody(const beast::error_code& ec, std::shared_ptr<Session> self);
  void onReadError(const beast::error_code& ec);
  // Applies the request's route's own body limit (RouteOptions) once its head is read: false when
  // the request was refused 413 from its Content-Length.
  bool applyRouteBodyLimit();
  // Asks ServerOptions::admit about the request's head: false when it was refused unread.
  bool admitHead();
  void dispatchRequest(std::shared_ptr<Session> self);
  // Writes out_ (an answer), then reads the next request or closes.
  void writeMessage(bool close);
  void onWritten(const beast::error_code& ec, bool close);
  void sendError(int status, std::string_view code, std::string_view message);
  // Answers a request whose body was not read, then ends the connection.
  void refuseUnread(Response&& response);
  void pumpStream();
  void onStreamWritten(const beast::error_code& ec);
  void endRequest(bool close);
  void lingerClose();
  void linger();
  void closeNow();
  void onDeadline();

  // Channel mode (http/channel.h). Requests are read and dispatched as their frames arrive; the
  // answers are appended to `out` as they come and written together once the loop has run what
  // was ready (one write for every answer of a burst).
  //
  // Why a request for the channel path cannot have one (empty: it can); see dispatchRequest.
  static std::string_view channelRefusal(const Request& request);
  void startChannel();
  void readChannel();
  void onChannelRead(const beast::error_code& ec, std::size_t n);
  // Dispatches every whole frame in buffer_ while the channel's bounds allow (ChannelFlow); false
  // when the session closed on a malformed one.
  bool takeFrames();
  // After frames were taken: reads on unless the bounds paused reading, and keeps the deadline.
  void afterFramesTaken();
  // Reading paused at a bound: takes the frames waiting and reads on, once below both.
  void resumeChannel();
  void armChannelDeadline(Watchdog::Clock::time_point now);
  std::size_t queuedBytes() const { return channel_->out.size() + channel_->writing.size(); }
  // The body limit of a request read from a frame: the server's, or its route's.
  std::size_t channelBodyLimit(const Request& request) const;
  void refuseFrame(const channel::FrameHead& head, std::size_t limit);
  void closeOnMalformedFrame(const std::string& error);
  void channelAnswer(std::uint64_t id, Response&& response);
  void scheduleFlush();
  void flushChannel();
  void onChannelWritten(const beast::error_code& ec);
  // Sends goaway: no request after the last one read is taken; the session closes once the
  // answers to those it took are written.
  void goAway();
  void closeChannelWhenDone();
  void channelDeadline();
  void setBusy(bool busy) {
    if (busy_ == busy) return;
    busy_ = busy;
    core_.sessionBusy(busy);
  }

  BeastServer::Core& core_;
  const std::shared_ptr<BeastServer::Core> keepCore_;  // see Core::keepAlive
  const net::any_io_executor exec_;
  AnyStream stream_;
  const net::ip::address peer_;
  const std::string remote_;
  // The deadline of the current read or write, or of the idle wait; past it the connection closes.
  Watchdog watchdog_;
  beast::flat_buffer buffer_;
  std::optional<MessageParser<true>> parser_;
  State state_ = State::kHandshake;
  bool stopping_ = false;
  bool busy_ = false;
  std::uint64_t seq_ = 0;  // which request a Responder answers; stale answers are dropped
  bool keepAlive_ = true;
  bool head_ = false;
  unsigned version_ = 11;
  std::size_t bodyLimit_ = 0;  // of the request being read: the server's, or its route's

  // Streaming response state.
  std::shared_ptr<StreamState> streamState_;
  std::deque<std::string> chunks_;
  std::string current_;
  bool streamWriting_ = false;
  bool finishRequested_ = false;
  bool lastChunkSent_ = false;
  bool closeAfterStream_ = false;
  std::array<char, 4096> drain_{};
  // The answer being written: its head, then its body, in one gather write.
  struct {
    std::string head;
    std::string body;
  } out_;

  struct Channel {
    Channel(ChannelFlow::Bounds bounds, beast::flat_buffer& in) : flow(bounds), frames(in) {}
    std::string out;      // frames to write next
    std::string writing;  // frames being written
    std::uint64_t lastId = 0;
    ChannelFlow flow;           // requests in flight, the bounds, the deadlines
    ChannelFrameReader frames;  // reads the requests out of buffer_
    bool isWriting = false;
    bool flushPosted = false;
    bool goaway = false;    // sent (or queued): no further request is taken
    bool shutDown = false;  // every answer written and our side shut: waiting for the client
  };
  std::unique_ptr<Channel> channel_;
  std::atomic<bool> isChannel_{false};  // read by canStream() from handler threads
};

// Posts every call to the session's strand, in the order made; the session drops calls that
// arrive after the stream ended.
class BeastStreamWriter : public StreamWriter {
 public:
  BeastStreamWriter(SessionRef ref, std::uint64_t seq, std::shared_ptr<StreamState> state)
      : ref_(std::move(ref)), seq_(seq), state_(std::move(state)) {}
  ~BeastStreamWriter() override { finish(); }

  bool write(std::string chunk) override {
    if (chunk.empty()) return state_->open.load();
    if (!state_->open.load() || ended_.load()) return false;
    net::post(ref_.session->executor(),
              [ref = ref_, seq = seq_, chunk = std::move(chunk)]() mutable {
                ref.session->streamWrite(seq, std::move(chunk));
              });
    return true;
  }
  void finish() override {
    if (ended_.exchange(true)) return;
    net::post(ref_.session->executor(),
              [ref = ref_, seq = seq_] { ref.session->streamFinish(seq); });
  }
  void abort() override {
    if (ended_.exchange(true)) return;
    state_->open = false;
    net::post(ref_.session->executor(),
              [ref = ref_, seq = seq_] { ref.session->streamAbort(seq); });
  }

 private:
  const SessionRef ref_;
  const std::uint64_t seq_;
  const std::shared_ptr<StreamState> state_;
  std::atomic<bool> ended_{false};
};

void Session::begin() {
  watchdog_.onExpire([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->onDeadline();
  });
  if (!stream_.isTls()) {
    readHeader();
    return;
  }
  state_ = State::kHandshake;
  watchdog_.expiresAfter(core_.options.requestTimeout);
  stream_.tls().async_handshake(ssl::stream_base::server,
                                [self = shared_from_this()](const beast::error_code& ec) {
                                  if (self->state_ == State::kClosed) return;
                                  if (ec) {
                                    self->closeNow();
                                    return;
                                  }
                                  self->readHeader();
                                });
}

void Session::readHeader() {
  state_ = State::kReading;
  if (stopping_) {
    closeNow();
    return;
  }
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  bodyLimit_ = core_.options.maxBodyBytes;
  parser_->body_limit(bodyLimit_);
  // One deadline for the whole request, headers and body; on an idle keep-alive connection it is
  // the idle timeout.
  watchdog_.expiresAfter(core_.options.requestTimeout);
  parser_->eager(false);
  asyncReadUntil(
      stream_, buffer_, *parser_, [](const auto& p) { return p.is_header_done(); },
      [self = shared_from_this()](const beast::error_code& ec) mutable {
        Session& session = *self;
        session.onHeader(ec, std::move(self));
      });
}

void Session::onHeader(const beast::error_code& ec, std::shared_ptr<Session> self) {
  if (state_ == State::kClosed) return;
  if (ec) {
    onReadError(ec);
    return;
  }
  if (!parser_->method()) {
    // No route takes it: answered at once, its body never read.
    sendError(501, "NotImplemented",
              "method " + std::string(parser_->methodText()) + " is not supported");
    return;
  }
  if (core_.router.hasBodyLimits() && !applyRouteBodyLimit()) return;
  if (core_.options.admit && !admitHead()) return;
  if (parser_->is_done()) {
    dispatchRequest(std::move(self));
    return;
  }
  if (parser_->expectsContinue()) {
    auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_,
                                                                     parser_->version());
    stream_.visit([cont, &self](auto& s) {
      bhttp::async_write(
          s, *cont,
          [self = std::move(self), cont](const beast::error_code& e, std::size_t) mutable {
            if (self->state_ == State::kClosed) return;
            if (e) {
              self->closeNow();
              return;
            }
            Session& session = *self;
            session.readBody(std::move(self));
          });
    });
    return;
  }
  readBody(std::move(self));
}

void Session::readBody(std::shared_ptr<Session> self) {
  // Usually the body came with the header, in the same read, and is parsed without I/O.
  parser_->eager(true);
  asyncReadUntil(
      stream_, buffer_, *parser_, [](const auto& p) { return p.is_done(); },
      [self = std::move(self)](const beast::error_code& ec) mutable {
        Session& session = *self;
        session.onBody(ec, std::move(self));
      });
}

void Session::onBody(const beast::error_code& ec, std::shared_ptr<Session> self) {
  if (state_ == State::kClosed) return;
  if (ec) {
    onReadError(ec);
    return;
  }
  dispatchRequest(std::move(self));
}

std::string bodyTooLarge(std::size_t limit) {
  return "request body exceeds " + std::to_string(limit) + " bytes";
}

bool Session::applyRouteBodyLimit() {
  const std::optional<std::size_t> limit =
      core_.router.bodyLimit(*parser_->method(), parser_->get().target);
  if (!limit || *limit >= bodyLimit_) return true;
  bodyLimit_ = *limit;
  if (const auto length = parser_->content_length(); length && *length > bodyLimit_) {
    sendError(413, "PayloadTooLarge", bodyTooLarge(bodyLimit_));
    return false;
  }
  parser_->body_limit(bodyLimit_);  // a chunked body stops there
  return true;
}

bool Session::admitHead() {
  Request& head = parser_->get();
  head.method = *parser_->method();
  head.remoteAddress = remote_;
  std::optional<Response> refusal = core_.options.admit(head);
  if (!refusal) return true;
  refuseUnread(std::move(*refusal));
  return false;
}

void Session::onReadError(const beast::error_code& ec) {
  if (ec == bhttp::error::body_limit) {
    sendError(413, "PayloadTooLarge", bodyTooLarge(bodyLimit_));
    return;
  }
  if (ec == bhttp::error::header_limit) {
    sendError(431, "RequestHeaderFieldsTooLarge",
              "request headers exceed " + std::to_string(kHeaderLimit) + " bytes");
    return;
  }
  if (isParseError(ec) && ec != bhttp::error::end_of_stream &&
      ec != bhttp::error::partial_message) {
    sendError(400, "InvalidArgument", "malformed HTTP request: " + ec.message());
    return;
  }
  // The peer closed or reset: nothing can be answered. (A request not sent in time never gets
  // here: the watchdog closed the session, and the handlers return on a closed session.)
  closeNow();
}

void Session::dispatchRequest(std::shared_ptr<Session> self) {
  ++seq_;
  state_ = State::kHandling;
  setBusy(true);
  keepAlive_ = parser_->keep_alive();
  version_ = parser_->version();
  watchdog_.never();  // the handler may take its time; the write has its own deadline

  const Method method = *parser_->method();  // onHeader answered the others
  head_ = method == Method::kHead;
  Request request = std::move(parser_->get());
  request.method = method;
  request.remoteAddress = remote_;
  if (core_.options.acceptChannels && request.path() == channel::kPath) {
    if (stopping_) {
      // Not 404: the client would take it for a server without channels and go on in plain
      // HTTP; 503 tells it to send the requests elsewhere.
      answer(seq_, Response::error(503, "Unavailable", "the server is stopping"));
      return;
    }
    if (const std::string_view refusal = channelRefusal(request); !refusal.empty()) {
      const bool get = request.method == Method::kGet;
      Response refused =
          Response::error(get ? 400 : 405, get ? "InvalidArgument" : "MethodNotAllowed", refusal);
      if (!get) refused.headers.set("Allow", "GET");
      answer(seq_, std::move(refused));
      return;
    }
    startChannel();
    return;
  }

  // The Responder holds the session (the target) and, when the server runs its own threads, the
  // core (released after it, so the io_context outlives the session). On shared threads the
  // session holds the core itself (keepCore_), and another reference would cost two atomic
  // writes per request to a cache line that every I/O thread writes.
  Responder responder(std::move(self), seq_, keepCore_ ? nullptr : core_.shared_from_this());
  // Nothing after this line may touch the session's state: the handler may have answered
  // already, inline, and the connection moved on.
  core_.router.dispatch(std::move(request), std::move(responder));
}

void Session::respond(std::uint64_t seq, Response&& response) {
  // On the session's own thread (a handler that answers at once, or a forward answered on the
  // thread of its connection, as the client arranges) the answer goes out without a hand-off;
  // the caller (Responder::send) holds the session and the core meanwhile. net::dispatch would
  // run it inline too, after copying both references and moving the response into its handler.
  if (const auto* loop = exec_.target<net::io_context::executor_type>();
      loop != nullptr && loop->running_in_this_thread()) {
    answer(seq, std::move(response));
    return;
  }
  net::dispatch(exec_, [ref = SessionRef{core_.shared_from_this(), shared_from_this()}, seq,
                        response = std::move(response)]() mutable {
    ref.session->answer(seq, std::move(response));
  });
}

std::unique_ptr<StreamWriter> Session::startStream(std::uint64_t seq, int status, Headers headers) {
  SessionRef ref{core_.shared_from_this(), shared_from_this()};
  auto state = std::make_shared<StreamState>();
  net::dispatch(exec_, [ref, seq, status, headers = std::move(headers), state]() mutable {
    ref.session->beginStream(seq, status, std::move(headers), state);
  });
  return std::make_unique<BeastStreamWriter>(std::move(ref), seq, std::move(state));
}

template <typename Message>
bool copyHeaders(const Headers& from, Message& to) {
  for (const auto& [name, value] : from) {
    if (!isFramingHeader(name)) to.insert(toBeast(name), toBeast(value));
  }
  return asksToClose(from);
}

unsigned validStatus(int status) {
  return (status >= 100 && status <= 999) ? static_cast<unsigned>(status) : 500u;
}

void Session::answer(std::uint64_t seq, Response&& response) {
  if (channel_) {
    channelAnswer(seq, std::move(response));
    return;
  }
  if (seq != seq_ || state_ != State::kHandling) return;
  const int status = static_cast<int>(validStatus(response.status));
  const bool close = !keepAlive_ || stopping_ || asksToClose(response.headers);
  if (statusHasNoBody(status)) response.body.clear();
  writeResponseHead(out_.head, status, response.headers, response.body.size(), version_, close);
  // HEAD: the Content-Length of the body that would have been sent, and no body.
  out_.body = head_ ? std::string() : std::move(response.body);
  writeMessage(close);
}

void Session::writeMessage(bool close) {
  state_ = State::kWriting;
  watchdog_.expiresAfter(core_.options.requestTimeout);
  asyncWriteMessage(stream_, out_.head, out_.body,
                    [self = shared_from_this(), close](const beast::error_code& ec, std::size_t) {
                      self->onWritten(ec, close);
                    });
}

void Session::onWritten(const beast::error_code& ec, bool close) {
  if (state_ == State::kClosed) return;
  if (ec) {
    closeNow();
    return;
  }
  endRequest(close);
}

void Session::endRequest(bool close) {
  setBusy(false);
  if (close) {
    lingerClose();
  } else {
    readHeader();
  }
}

void Session::sendError(int status, std::string_view code, std::string_view message) {
  refuseUnread(Response::error(status, code, message));
}

void Session::refuseUnread(Response&& response) {
  // Framing may be lost (a body we did not read), so the connection ends after this answer.
  ++seq_;
  state_ = State::kHandling;
  setBusy(true);
  keepAlive_ = false;
  version_ = parser_ && parser_->is_header_done() ? parser_->version() : 11;
  head_ = false;
  answer(seq_, std::move(response));
}

void Session::lingerClose() {
  if (stream_.isTls()) {
    closeNow();
    return;
  }
  state_ = State::kLingering;
  setBusy(false);
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  watchdog_.expiresAfter(kLingerTime);
  linger();
}

void Session::linger() {
  stream_.tcp().async_read_some(
      net::buffer(drain_), [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
        if (self->state_ == State::kClosed) return;
        if (ec) {
          self->closeNow();
          return;
        }
        self->linger();
      });
}

void Session::onDeadline() {
  if (state_ == State::kChannel) {
    channelDeadline();
    return;
  }
  closeNow();
}

void Session::closeNow() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  if (streamState_) streamState_->open = false;
  setBusy(false);
  stream_.close();
}

void Session::beginStream(std::uint64_t seq, int status, Headers headers,
                          std::shared_ptr<StreamState> state) {
  if (seq != seq_ || state_ != State::kHandling) {
    state->open = false;
    return;
  }
  state_ = State::kStreaming;
  streamState_ = std::move(state);
  chunks_.clear();
  finishRequested_ = false;
  lastChunkSent_ = false;
  auto msg = std::make_shared<bhttp::response<bhttp::empty_body>>();
  msg->version(version_);
  msg->result(validStatus(status));
  const bool closeRequested = copyHeaders(headers, *msg);
  msg->chunked(true);
  closeAfterStream_ = !keepAlive_ || stopping_ || closeRequested;
  msg->keep_alive(!closeAfterStream_);
  auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*msg);
  streamWriting_ = true;
  watchdog_.expiresAfter(core_.options.requestTimeout);
  stream_.visit([this, &msg, &serializer](auto& s) {
    bhttp::async_write_header(
        s, *serializer,
        [self = shared_from_this(), msg, serializer](const beast::error_code& ec, std::size_t) {
          self->onStreamWritten(ec);
        });
  });
}

void Session::streamWrite(std::uint64_t seq, std::string chunk) {
  if (seq != seq_ || state_ != State::kStreaming || finishRequested_) return;
  chunks_.push_back(std::move(chunk));
  pumpStream();
}

void Session::streamFinish(std::uint64_t seq) {
  if (seq != seq_ || state_ != State::kStreaming) return;
  finishRequested_ = true;
  pumpStream();
}

void Session::streamAbort(std::uint64_t seq) {
  if (seq != seq_ || state_ != State::kStreaming) return;
  closeNow();
}

void Session::pumpStream() {
  if (streamWriting_) return;
  auto done = [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
    self->onStreamWritten(ec);
  };
  if (!chunks_.empty()) {
    current_ = std::move(chunks_.front());
    chunks_.pop_front();
    streamWriting_ = true;
    watchdog_.expiresAfter(core_.options.requestTimeout);
    stream_.visit([this, &done](auto& s) {
      net::async_write(s, bhttp::make_chunk(net::buffer(current_)), done);
    });
  } else if (finishRequested_ && !lastChunkSent_) {
    lastChunkSent_ = true;
    streamWriting_ = true;
    watchdog_.expiresAfter(core_.options.requestTimeout);
    stream_.visit([&done](auto& s) { net::async_write(s, bhttp::make_chunk_last(), done); });
  }
}

void Session::onStreamWritten(const beast::error_code& ec) {
  if (state_ == State::kClosed) return;
  streamWriting_ = false;
  if (ec) {
    closeNow();
    return;
  }
  // Between chunks the stream may stay quiet for as long as the handler likes (a watch).
  watchdog_.never();
  if (lastChunkSent_) {
    streamState_->open = false;
    streamState_.reset();
    current_.clear();
    endRequest(closeAfterStream_);
    return;
  }
  pumpStream();
}

std::string_view Session::channelRefusal(const Request& request) {
  if (request.method != Method::kGet) return "a channel is asked for with GET";
  const auto upgrade = request.headers.get("upgrade");
  if (!upgrade || !listHolds(*upgrade, channel::kProtocol)) {
    return "a channel needs the header Upgrade: kshard-channel/1";
  }
  const auto connection = request.headers.get("connection");
  if (!connection || !listHolds(*connection, "upgrade")) {
    return "a channel needs the header Connection: Upgrade";
  }
  return {};
}

void Session::startChannel() {
  state_ = State::kChannel;
  isChannel_ = true;
  setBusy(false);
  const ServerOptions& o = core_.options;
  channel_ = std::make_unique<Channel>(
      ChannelFlow::Bounds{o.maxChannelRequestsInFlight, o.maxChannelQueuedBytes, o.requestTimeout},
      buffer_);
  channel_->out.append("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ");
  channel_->out.append(channel::kProtocol);
  channel_->out.append("\r\n\r\n");
  flushChannel();
  // Frames the client sent behind its upgrade request are taken at once.
  if (takeFrames()) afterFramesTaken();
}

void Session::readChannel() {
  const std::size_t want = channel_->frames.readSize();
  stream_.visitIo([this, want](auto& s) {
    s.async_read_some(buffer_.prepare(want),
                      [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
                        self->onChannelRead(ec, n);
                      });
  });
}

void Session::onChannelRead(const beast::error_code& ec, std::size_t n) {
  if (state_ == State::kClosed) return;
  if (ec) {
    // The client closed (or the connection broke): answers still to come have nowhere to go.
    closeNow();
    return;
  }
  buffer_.commit(n);
  if (channel_->shutDown) {
    buffer_.consume(buffer_.size());
    trimChannelBuffer(buffer_);
    readChannel();
    return;
  }
  if (takeFrames()) afterFramesTaken();
}

void Session::afterFramesTaken() {
  Channel& c = *channel_;
  const auto now = Watchdog::Clock::now();
  // What is left in the buffer is part of a frame, unless reading paused before whole ones.
  c.flow.afterRead(buffer_.size() > 0 || c.frames.skipping(), now);
  c.frames.trim();
  if (!c.flow.paused()) readChannel();
  armChannelDeadline(now);
}

void Session::resumeChannel() {
  Channel& c = *channel_;
  if (c.shutDown || !c.flow.resume(queuedBytes())) return;
  if (takeFrames()) afterFramesTaken();
}

void Session::armChannelDeadline(Watchdog::Clock::time_point now) {
  const auto deadline = channel_->flow.deadline(now);
  if (deadline == ChannelFlow::kNever) {
    watchdog_.never();  // handlers may take their time, as with plain HTTP
  } else {
    watchdog_.expiresAt(deadline);
  }
}

bool Session::takeFrames() {
  Channel& c = *channel_;
  for (;;) {
    if (!c.frames.discardSkipped()) return true;
    // Back-pressure: past a bound, what the peer sends waits in the sockets' buffers.
    if (!c.goaway && !c.flow.mayTake(queuedBytes())) return true;
    channel::FrameHead head;
    std::string error;
    const auto next = c.frames.next(head, error);
    if (next == ChannelFrameReader::Next::kNeedMore) return true;
    if (next == ChannelFrameReader::Next::kHead && head.type != channel::FrameType::kRequest) {
      error = "a client sends only requests";
    } else if (error.empty() && head.id <= c.lastId) {
      error = "request ids must increase";
    }
    if (!error.empty()) {
      closeOnMalformedFrame(error);
      return false;
    }
    if (c.goaway) {
      // After goaway nothing more is taken: the client knows from its id that it was not.
      c.frames.skip(head);
      continue;
    }
    if (channel::minBodyBytes(head.payloadBytes) > core_.options.maxBodyBytes) {
      refuseFrame(head, core_.options.maxBodyBytes);
      continue;
    }
    const std::optional<std::string_view> payload = c.frames.payload(head);
    if (!payload) return true;
    Request request;
    if (!channel::parseRequest(*payload, request, error)) {
      closeOnMalformedFrame(error);
      return false;
    }
    if (const std::size_t limit = channelBodyLimit(request); request.body.size() > limit) {
      refuseFrame(head, limit);
      continue;
    }
    c.frames.consume(head);
    c.lastId = head.id;
    if (c.flow.inFlight() == 0) setBusy(true);
    c.flow.taken();
    request.remoteAddress = remote_;
    Responder responder(shared_from_this(), head.id,
                        keepCore_ ? nullptr : core_.shared_from_this());
    core_.router.dispatch(std::move(request), std::move(responder));
    // The handler may have answered inline, or a failed write closed the session meanwhile.
    if (state_ == State::kClosed) return false;
  }
}

void Session::closeOnMalformedFrame(const std::string& error) {
  if (core_.options.logger) {
    core_.options.logger->warn("closing a channel on a malformed frame",
                               {{"remote", remote_}, {"error", error}});
  }
  closeNow();
}

std::size_t Session::channelBodyLimit(const Request& request) const {
  const std::size_t limit = core_.options.maxBodyBytes;
  if (!core_.router.hasBodyLimits()) return limit;
  return std::min(limit, core_.router.bodyLimit(request.method, request.target).value_or(limit));
}

void Session::refuseFrame(const channel::FrameHead& head, std::size_t limit) {
  Channel& c = *channel_;
  c.lastId = head.id;
  c.frames.skip(head);
  if (c.flow.inFlight() == 0) setBusy(true);
  c.flow.taken();
  channelAnswer(head.id, Response::error(413, "PayloadTooLarge", bodyTooLarge(limit)));
}

void Session::channelAnswer(std::uint64_t id, Response&& response) {
  if (state_ != State::kChannel) return;
  Channel& c = *channel_;
  if (response.headers.holdsAny(Headers::kFraming)) response.headers.removeIf(isFramingHeader);
  channel::appendResponse(c.out, id, static_cast<int>(validStatus(response.status)),
                          response.headers, response.body);
  // Every request is answered exactly once (a Responder answers 500 when dropped). The session
  // stays busy until the answer is written (flushChannel): stop() waits for that, not only for
  // the handler.
  c.flow.answered(queuedBytes());
  scheduleFlush();
  if (c.flow.paused()) resumeChannel();
}

void Session::scheduleFlush() {
  Channel& c = *channel_;
  if (c.isWriting || c.flushPosted) return;
  c.flushPosted = true;
  // After the handlers the loop has ready: the answers they produce go in the same write.
  net::post(exec_, [self = shared_from_this()] {
    if (self->state_ != State::kChannel) return;
    self->channel_->flushPosted = false;
    self->flushChannel();
  });
}

void Session::flushChannel() {
  Channel& c = *channel_;
  if (c.isWriting) return;
  if (c.out.empty()) {
    if (c.flow.inFlight() == 0) setBusy(false);
    closeChannelWhenDone();
    return;
  }
  c.writing.swap(c.out);
  c.isWriting = true;
  const auto now = Watchdog::Clock::now();
  c.flow.writeStarted(now);
  armChannelDeadline(now);
  stream_.visitIo([this, &c](auto& s) {
    net::async_write(s, net::buffer(c.writing),
                     [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                       self->onChannelWritten(ec);
                     });
  });
}

void Session::onChannelWritten(const beast::error_code& ec) {
  if (state_ == State::kClosed) return;
  if (ec) {
    closeNow();
    return;
  }
  Channel& c = *channel_;
  c.isWriting = false;
  c.writing.clear();
  trimChannelBuffer(c.writing);
  c.flow.writeEnded();
  armChannelDeadline(Watchdog::Clock::now());
  if (c.flow.paused()) {
    resumeChannel();
    if (state_ == State::kClosed) return;
  }
  flushChannel();
}

void Session::goAway() {
  Channel& c = *channel_;
  if (c.goaway) return;
  c.goaway = true;
  channel::appendGoaway(c.out, c.lastId);
  scheduleFlush();
}

void Session::closeChannelWhenDone() {
  Channel& c = *channel_;
  if (!c.goaway || c.flow.inFlight() > 0 || c.isWriting || !c.out.empty() || c.shutDown) return;
  // Our side ends; the client closes its side once it read the answers, or the linger time ends.
  c.shutDown = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  watchdog_.expiresAfter(kLingerTime);
}

void Session::channelDeadline() {
  Channel& c = *channel_;
  // Idle for requestTimeout: the channel ends politely. A write or a frame that did not finish
  // in that time, or a client that did not close after goaway, ends it at once.
  if (!c.goaway && c.flow.idleExpired()) {
    goAway();
    return;
  }
  closeNow();
}

}  // namespace

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
  auto session = tls ? std::make_shared<Session>(*this, AnyStream(std::move(plain), *tls), remote)
                     : std::make_shared<Session>(*this, AnyStream(std::move(plain)), remote);
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
    : core_(std::make_shared<Core>(std::move(options))) {}

BeastServer::~BeastServer() { stop(); }

void BeastServer::route(Method method, std::string_view pattern, Handler handler,
                        RouteOptions options) {
  core_->router.add(method, pattern, std::move(handler), options);
}

Status BeastServer::start() {
  Core& c = *core_;
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
  Core& c = *core_;
  std::vector<std::shared_ptr<Session>> live;
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
  for (auto& s : live) s->shutdown();
  {
    std::unique_lock<std::mutex> lock(c.mu);
    c.cv.wait_for(lock, grace, [&c] { return c.busyCount == 0; });
  }
  // Sessions accepted before the acceptor closed may have joined since the snapshot.
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (auto& [ptr, weak] : c.sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  auto remaining = std::make_shared<std::size_t>(live.size());
  for (auto& s : live) {
    s->forceClose([&c, remaining] {
      std::lock_guard<std::mutex> lock(c.mu);
      --*remaining;
      c.cv.notify_all();
    });
  }
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

std::uint16_t BeastServer::port() const { return core_->port; }

std::uint64_t BeastServer::connectionsAccepted() const { return core_->accepted.load(); }

std::size_t BeastServer::openConnections() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->sessions.size();
}

std::size_t BeastServer::channelQueuedBytesHighWater() const {
  return core_->channelQueuedHighWater.load();
}

std::uint64_t BeastServer::connectionsRefused() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->refused;
}

}  // namespace kshard::http
