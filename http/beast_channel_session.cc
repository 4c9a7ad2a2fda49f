// The channel session of a BeastServer connection (http/channel.h): once an HTTP/1.1 session
// answered a request for a channel by handing the connection here, requests are read and
// dispatched as their frames arrive; the answers are appended to `out` as they come and written
// together once the loop has run what was ready (one write for every answer of a burst).
#include "http/channel.h"
#include "http/internal/beast_server_session.h"
#include "http/internal/channel_flow.h"
#include "http/internal/channel_frame_reader.h"

namespace kshard::http::beast_detail {

namespace {

class ChannelSession : public std::enable_shared_from_this<ChannelSession>,
                       public ResponseTarget,
                       public ServerSession {
 public:
  ChannelSession(BeastServer::Core& core, AnyStream stream, beast::flat_buffer buffer,
                 const net::ip::address& peer, const std::string& remote)
      : ServerSession(core, std::move(stream), peer, remote),
        channel_(
            ChannelFlow::Bounds{core.options.maxChannelRequestsInFlight,
                                core.options.maxChannelQueuedBytes, core.options.requestTimeout},
            buffer_) {
    buffer_ = std::move(buffer);
  }

  ~ChannelSession() override { core_.noteChannelQueued(channel_.flow.queuedHighWater()); }

  void start() override {
    net::dispatch(exec_, [self = shared_from_this()] { self->begin(); });
  }

  // Server stop: sends goaway, then closes once the answers to the requests taken are written
  // and the client has closed (busy until then: see goAway).
  void shutdown(std::function<void()> done) override {
    net::post(exec_, [self = shared_from_this(), done = std::move(done)] {
      if (!self->closed_) self->goAway();
      done();
    });
  }

  void forceClose(std::function<void()> done) override {
    net::post(exec_, [self = shared_from_this(), done = std::move(done)] {
      self->closeNow();
      done();
    });
  }

  // ResponseTarget: a handler's Responder answers request `id` (its frame id) through this, from
  // any thread.
  void respond(std::uint64_t id, Response&& response) override;

 private:
  // Answers the upgrade request, then takes the frames the client sent behind it.
  void begin();

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
  std::size_t queuedBytes() const { return channel_.out.size() + channel_.writing.size(); }
  // The body limit of a request read from a frame: the server's, or its route's.
  std::size_t channelBodyLimit(const Request& request) const;
  void refuseFrame(const channel::FrameHead& head, std::size_t limit);
  void closeOnMalformedFrame(const std::string& error);
  void channelAnswer(std::uint64_t id, Response&& response);
  void scheduleFlush();
  void flushChannel();
  void onChannelWritten(const beast::error_code& ec);
  // Sends goaway: no request after the last one read is taken; the session closes once the
  // answers to those it took are written. It is busy from then until it is closed, so that a
  // server stop waits (within its grace) for the goaway to be written and read: a request the
  // client sent meanwhile is then one it knows was not taken, not one cut without a word.
  void goAway();
  void closeChannelWhenDone();
  void channelDeadline();
  void closeNow();

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
  Channel channel_;
  bool closed_ = false;
};

void ChannelSession::respond(std::uint64_t id, Response&& response) {
  // On the session's own thread (a handler that answers at once, or a forward answered on the
  // thread of its connection, as the client arranges) the answer goes out without a hand-off;
  // the caller (Responder::send) holds the session and the core meanwhile.
  if (const auto* loop = exec_.target<net::io_context::executor_type>();
      loop != nullptr && loop->running_in_this_thread()) {
    channelAnswer(id, std::move(response));
    return;
  }
  net::dispatch(exec_,
                [ref = SessionRef<ChannelSession>{core_.shared_from_this(), shared_from_this()}, id,
                 response = std::move(response)]() mutable {
                  ref.session->channelAnswer(id, std::move(response));
                });
}

void ChannelSession::begin() {
  watchdog_.onExpire([weak = weak_from_this()] {
    // A closed session has nothing left to time out.
    if (auto self = weak.lock(); self && !self->closed_) self->channelDeadline();
  });
  channel_.out.append("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ");
  channel_.out.append(channel::kProtocol);
  channel_.out.append("\r\n\r\n");
  flushChannel();
  // Frames the client sent behind its upgrade request are taken at once.
  if (takeFrames()) afterFramesTaken();
}

void ChannelSession::readChannel() {
  const std::size_t want = channel_.frames.readSize();
  stream_.visitIo([this, want](auto& s) {
    s.async_read_some(buffer_.prepare(want),
                      [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
                        self->onChannelRead(ec, n);
                      });
  });
}

void ChannelSession::onChannelRead(const beast::error_code& ec, std::size_t n) {
  if (closed_) return;
  if (ec) {
    // The client closed (or the connection broke): answers still to come have nowhere to go.
    closeNow();
    return;
  }
  buffer_.commit(n);
  if (channel_.shutDown) {
    buffer_.consume(buffer_.size());
    trimChannelBuffer(buffer_);
    readChannel();
    return;
  }
  if (takeFrames()) afterFramesTaken();
}

void ChannelSession::afterFramesTaken() {
  Channel& c = channel_;
  const auto now = Watchdog::Clock::now();
  // What is left in the buffer is part of a frame, unless reading paused before whole ones.
  c.flow.afterRead(buffer_.size() > 0 || c.frames.skipping(), now);
  c.frames.trim();
  if (!c.flow.paused()) readChannel();
  armChannelDeadline(now);
}

void ChannelSession::resumeChannel() {
  Channel& c = channel_;
  if (c.shutDown || !c.flow.resume(queuedBytes())) return;
  if (takeFrames()) afterFramesTaken();
}

void ChannelSession::armChannelDeadline(Watchdog::Clock::time_point now) {
  const auto deadline = channel_.flow.deadline(now);
  if (deadline == ChannelFlow::kNever) {
    watchdog_.never();  // handlers may take their time, as with plain HTTP
  } else {
    watchdog_.expiresAt(deadline);
  }
}

bool ChannelSession::takeFrames() {
  Channel& c = channel_;
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
    if (closed_) return false;
  }
}

void ChannelSession::closeOnMalformedFrame(const std::string& error) {
  if (core_.options.logger) {
    core_.options.logger->warn("closing a channel on a malformed frame",
                               {{"remote", remote_}, {"error", error}});
  }
  closeNow();
}

std::size_t ChannelSession::channelBodyLimit(const Request& request) const {
  const std::size_t limit = core_.options.maxBodyBytes;
  if (!core_.router.hasBodyLimits()) return limit;
  return std::min(limit, core_.router.bodyLimit(request.method, request.target).value_or(limit));
}

void ChannelSession::refuseFrame(const channel::FrameHead& head, std::size_t limit) {
  Channel& c = channel_;
  c.lastId = head.id;
  c.frames.skip(head);
  if (c.flow.inFlight() == 0) setBusy(true);
  c.flow.taken();
  channelAnswer(head.id, Response::error(413, "PayloadTooLarge", bodyTooLarge(limit)));
}

void ChannelSession::channelAnswer(std::uint64_t id, Response&& response) {
  if (closed_) return;
  Channel& c = channel_;
  if (response.headers.holdsAny(Headers::kFraming)) response.headers.removeIf(isFramingHeader);
  channel::appendResponse(c.out, id, static_cast<int>(validStatus(response.status)),
                          response.headers, response.payload());
  // Every request is answered exactly once (a Responder answers 500 when dropped). The session
  // stays busy until the answer is written (flushChannel): stop() waits for that, not only for
  // the handler.
  c.flow.answered(queuedBytes());
  scheduleFlush();
  if (c.flow.paused()) resumeChannel();
}

void ChannelSession::scheduleFlush() {
  Channel& c = channel_;
  if (c.isWriting || c.flushPosted) return;
  c.flushPosted = true;
  // After the handlers the loop has ready: the answers they produce go in the same write.
  net::post(exec_, [self = shared_from_this()] {
    if (self->closed_) return;
    self->channel_.flushPosted = false;
    self->flushChannel();
  });
}

void ChannelSession::flushChannel() {
  Channel& c = channel_;
  if (c.isWriting) return;
  if (c.out.empty()) {
    if (c.flow.inFlight() == 0 && !c.goaway) setBusy(false);
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

void ChannelSession::onChannelWritten(const beast::error_code& ec) {
  if (closed_) return;
  if (ec) {
    closeNow();
    return;
  }
  Channel& c = channel_;
  c.isWriting = false;
  c.writing.clear();
  trimChannelBuffer(c.writing);
  c.flow.writeEnded();
  armChannelDeadline(Watchdog::Clock::now());
  if (c.flow.paused()) {
    resumeChannel();
    if (closed_) return;
  }
  flushChannel();
}

void ChannelSession::goAway() {
  Channel& c = channel_;
  if (c.goaway) return;
  c.goaway = true;
  setBusy(true);  // until closeNow: the client closes once it read the goaway and the answers
  channel::appendGoaway(c.out, c.lastId);
  scheduleFlush();
}

void ChannelSession::closeChannelWhenDone() {
  Channel& c = channel_;
  if (!c.goaway || c.flow.inFlight() > 0 || c.isWriting || !c.out.empty() || c.shutDown) return;
  // Our side ends; the client closes its side once it read the answers, or the linger time ends.
  c.shutDown = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  watchdog_.expiresAfter(kLingerTime);
}

void ChannelSession::channelDeadline() {
  Channel& c = channel_;
  // Idle for requestTimeout: the channel ends politely. A write or a frame that did not finish
  // in that time, or a client that did not close after goaway, ends it at once.
  if (!c.goaway && c.flow.idleExpired()) {
    goAway();
    return;
  }
  closeNow();
}

void ChannelSession::closeNow() {
  if (closed_) return;
  closed_ = true;
  setBusy(false);
  stream_.close();
}

}  // namespace

std::shared_ptr<ServerSession> makeChannelSession(BeastServer::Core& core, AnyStream stream,
                                                  beast::flat_buffer buffer,
                                                  const net::ip::address& peer,
                                                  const std::string& remote) {
  return std::make_shared<ChannelSession>(core, std::move(stream), std::move(buffer), peer, remote);
}

}  // namespace kshard::http::beast_detail
