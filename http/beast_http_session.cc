// The HTTP/1.1 session of a BeastServer connection: reads requests one at a time, dispatches them
// to the router and writes their answers, whole or streamed (Responder::startStream). A request
// for a channel hands the connection to a channel session (beast_channel_session.cc).
#include <boost/beast/http.hpp>
#include <deque>
#include <optional>

#include "http/channel.h"
#include "http/internal/beast_message.h"
#include "http/internal/beast_server_session.h"

namespace kshard::http::beast_detail {

namespace {

namespace bhttp = boost::beast::http;

constexpr std::size_t kHeaderLimit = 64 * 1024;

bool isParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category();
}

class Session;

// Shared by every StreamWriter and the session it writes to: false once the stream can no longer
// carry data.
struct StreamState {
  std::atomic<bool> open{true};
};

class Session : public std::enable_shared_from_this<Session>,
                public ResponseTarget,
                public ServerSession {
 public:
  Session(BeastServer::Core& core, AnyStream stream, const tcp::endpoint& remote)
      : ServerSession(core, std::move(stream), remote.address(), formatEndpoint(remote)) {
    buffer_.reserve(kReadBufferBytes);
  }

  void start() override {
    net::dispatch(exec_, [self = shared_from_this()] { self->begin(); });
  }

  // Server stop: finish the request in progress, read no further one.
  void shutdown(std::function<void()> done) override {
    net::post(exec_, [self = shared_from_this(), done = std::move(done)]() mutable {
      if (const auto channel = self->channel_.lock()) {
        channel->shutdown(std::move(done));
        return;
      }
      self->stopping_ = true;
      if (self->state_ == State::kReading || self->state_ == State::kHandshake) self->closeNow();
      done();
    });
  }

  void forceClose(std::function<void()> done) override {
    net::post(exec_, [self = shared_from_this(), done = std::move(done)]() mutable {
      if (const auto channel = self->channel_.lock()) {
        channel->forceClose(std::move(done));
        return;
      }
      self->closeNow();
      done();
    });
  }

  // ResponseTarget: a handler's Responder answers request `seq` through these, from any thread.
  void respond(std::uint64_t seq, Response&& response) override;
  bool canStream() const override { return true; }
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
    kClosed  // or upgraded: the connection is the channel session's (startChannel)
  };

  void begin();
  void readHeader();
  // `self` is the reference the read's handler held, handed on from the header to the body to
  // the Responder, rather than taken anew at each step (an atomic compare-and-swap each).
  void onHeader(std::shared_ptr<Session> self);
  void readBody(std::shared_ptr<Session> self);
  // Reads until `done(parser)` holds, then runs `next`, unless the session closed meanwhile or
  // the read failed (onReadError).
  template <typename Done>
  void readUntil(std::shared_ptr<Session> self, Done done,
                 void (Session::*next)(std::shared_ptr<Session>));
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
  // The completion handler of an I/O step: it runs `next(self)` unless the session closed
  // meanwhile, and closes the session when the step failed.
  template <typename Next>
  static auto unlessFailed(std::shared_ptr<Session> self, Next next) {
    return [self = std::move(self), next = std::move(next)](const beast::error_code& ec,
                                                            auto&&...) mutable {
      if (self->state_ == State::kClosed) return;
      if (ec) {
        self->closeNow();
        return;
      }
      next(std::move(self));
    };
  }

  // Why a request for the channel path cannot have one (empty: it can); see dispatchRequest.
  static std::string_view channelRefusal(const Request& request);
  // Hands the connection to a channel session (http/channel.h), which answers the upgrade.
  void startChannel();

  std::optional<MessageParser<true>> parser_;
  State state_ = State::kHandshake;
  bool stopping_ = false;
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
    std::shared_ptr<const std::string> shared;  // instead of body: Response::sharedBody
  } out_;

  // The channel session the connection went on as, once upgraded: a server stop reaches it
  // through this session, when it took this one before the upgrade.
  std::weak_ptr<ServerSession> channel_;
};

// Posts every call to the session's strand, in the order made; the session drops calls that
// arrive after the stream ended.
class BeastStreamWriter : public StreamWriter {
 public:
  BeastStreamWriter(SessionRef<Session> ref, std::uint64_t seq, std::shared_ptr<StreamState> state)
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
  const SessionRef<Session> ref_;
  const std::uint64_t seq_;
  const std::shared_ptr<StreamState> state_;
  std::atomic<bool> ended_{false};
};

void Session::begin() {
  watchdog_.onExpire([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->closeNow();
  });
  if (!stream_.isTls()) {
    readHeader();
    return;
  }
  state_ = State::kHandshake;
  watchdog_.expiresAfter(core_.options.requestTimeout);
  stream_.tls().async_handshake(
      ssl::stream_base::server,
      unlessFailed(shared_from_this(), [](std::shared_ptr<Session> self) { self->readHeader(); }));
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
  readUntil(
      shared_from_this(), [](const auto& p) { return p.is_header_done(); }, &Session::onHeader);
}

template <typename Done>
void Session::readUntil(std::shared_ptr<Session> self, Done done,
                        void (Session::*next)(std::shared_ptr<Session>)) {
  asyncReadUntil(stream_, buffer_, *parser_, std::move(done),
                 [self = std::move(self), next](const beast::error_code& ec) mutable {
                   Session& session = *self;
                   if (session.state_ == State::kClosed) return;
                   if (ec) {
                     session.onReadError(ec);
                     return;
                   }
                   (session.*next)(std::move(self));
                 });
}

void Session::onHeader(std::shared_ptr<Session> self) {
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
      bhttp::async_write(s, *cont,
                         unlessFailed(std::move(self), [cont](std::shared_ptr<Session> reader) {
                           Session& session = *reader;
                           session.readBody(std::move(reader));
                         }));
    });
    return;
  }
  readBody(std::move(self));
}

void Session::readBody(std::shared_ptr<Session> self) {
  // Usually the body came with the header, in the same read, and is parsed without I/O.
  parser_->eager(true);
  readUntil(
      std::move(self), [](const auto& p) { return p.is_done(); }, &Session::dispatchRequest);
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
  net::dispatch(exec_, [ref = SessionRef<Session>{core_.shared_from_this(), shared_from_this()},
                        seq, response = std::move(response)]() mutable {
    ref.session->answer(seq, std::move(response));
  });
}

std::unique_ptr<StreamWriter> Session::startStream(std::uint64_t seq, int status, Headers headers) {
  SessionRef<Session> ref{core_.shared_from_this(), shared_from_this()};
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

void Session::answer(std::uint64_t seq, Response&& response) {
  if (seq != seq_ || state_ != State::kHandling) return;
  const int status = static_cast<int>(validStatus(response.status));
  const bool close = !keepAlive_ || stopping_ || asksToClose(response.headers);
  if (statusHasNoBody(status)) {
    response.body.clear();
    response.sharedBody.reset();
  }
  writeResponseHead(out_.head, status, response.headers, response.payload().size(), version_,
                    close);
  // HEAD: the Content-Length of the body that would have been sent, and no body.
  out_.body = head_ ? std::string() : std::move(response.body);
  out_.shared = head_ ? nullptr : std::move(response.sharedBody);
  writeMessage(close);
}

void Session::writeMessage(bool close) {
  state_ = State::kWriting;
  watchdog_.expiresAfter(core_.options.requestTimeout);
  asyncWriteMessage(stream_, out_.head,
                    out_.shared ? std::string_view(*out_.shared) : std::string_view(out_.body),
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
      net::buffer(drain_),
      unlessFailed(shared_from_this(), [](std::shared_ptr<Session> self) { self->linger(); }));
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
  setBusy(false);
  const std::shared_ptr<ServerSession> channel =
      makeChannelSession(core_, std::move(stream_), std::move(buffer_), peer_, remote_);
  // The stream is the channel session's now: nothing here may touch it again.
  state_ = State::kClosed;
  channel_ = channel;
  handOver(channel);
  channel->start();
}

}  // namespace

std::shared_ptr<ServerSession> makeHttpSession(BeastServer::Core& core, AnyStream stream,
                                               const tcp::endpoint& remote) {
  return std::make_shared<Session>(core, std::move(stream), remote);
}

}  // namespace kshard::http::beast_detail
