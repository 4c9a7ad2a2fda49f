#include "http/channel_client.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <queue>
#include <vector>

#include "http/internal/channel_client_core.h"

namespace kshard::http {

namespace beast_detail {

void Channel::submit(Request&& request, ResponseCallback&& done) {
  const auto timeout = request.timeout.count() > 0 ? request.timeout : core_.options.requestTimeout;
  const auto now = Clock::now();
  lastUse_ = now;
  if (state_ == State::kOpen) {
    enqueue(request, std::move(done), now + timeout, timeout);
    return;
  }
  waiting_.push_back(Waiting{std::move(request), std::move(done), now + timeout, timeout});
  armTimer(waiting_.back().deadline);
  if (state_ == State::kNew) connect();
}

void Channel::enqueue(const Request& request, ResponseCallback&& done, Clock::time_point deadline,
                      std::chrono::milliseconds timeout) {
  const std::uint64_t id = nextId_++;
  channel::appendRequest(out_, id, request.method, request.target, request.headers,
                         request.payload());
  outEnds_.push_back(FrameEnd{id, out_.size()});
  if (pending_.empty()) firstId_ = id;
  pending_.push_back(Pending{std::move(done), timeout, true});
  ++active_;
  due_.push(Due{deadline, id});
  if (due_.size() > 2 * active_ + 64) compactDue();
  armTimer(deadline);
  scheduleFlush();
}

Channel::Pending* Channel::find(std::uint64_t id) {
  if (id < firstId_ || id - firstId_ >= pending_.size()) return nullptr;
  Pending& p = pending_[id - firstId_];
  return p.active ? &p : nullptr;
}

void Channel::complete(Pending& p, StatusOr<Response>&& result) {
  ResponseCallback done = std::move(p.done);
  p.done = nullptr;
  p.active = false;
  --active_;
  while (!pending_.empty() && !pending_.front().active) {
    pending_.pop_front();
    ++firstId_;
  }
  if (active_ == 0) {
    lastUse_ = Clock::now();
    armTimer(lastUse_ + core_.options.idleTimeout);
  }
  // Last: the callback may send again, on this channel.
  done(std::move(result));
  if (goaway_ && active_ == 0 && state_ == State::kOpen) {
    // The server took nothing more and answered everything it took: it is closing.
    const Status s = unavailable(what() + ": the server closed the channel");
    end(s, s);
  }
}

void Channel::compactDue() {
  std::vector<Due> keep;
  keep.reserve(active_);
  while (!due_.empty()) {
    if (find(due_.top().id) != nullptr) keep.push_back(due_.top());
    due_.pop();
  }
  for (const Due& d : keep) due_.push(d);
}

void Channel::scheduleFlush() {
  if (isWriting_ || flushPosted_) return;
  flushPosted_ = true;
  // After the handlers the loop has ready: the requests they send go in the same write.
  net::post(exec_, [self = shared_from_this()] {
    self->flushPosted_ = false;
    self->flush();
  });
}

void Channel::flush() {
  if (isWriting_ || out_.empty() || state_ != State::kOpen) return;
  writing_.swap(out_);
  writingEnds_.swap(outEnds_);
  outEnds_.clear();
  writingUpTo_ = nextId_ - 1;
  isWriting_ = true;
  // A peer that reads nothing for requestTimeout ends the channel (onTimer).
  writeStarted_ = Clock::now();
  armTimer(writeStarted_ + core_.options.requestTimeout);
  writtenSoFar_ = 0;
  // In pieces of at most kWritePiece, so that a channel ending mid-write knows which frames
  // cannot have gone out whole: those past the piece being written.
  net::async_write(
      socket_, net::buffer(writing_),
      [self = shared_from_this()](const beast::error_code& ec, std::size_t n) -> std::size_t {
        self->writtenSoFar_ = n;
        return ec ? 0 : kWritePiece;
      },
      [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
        self->onWritten(ec, n);
      });
}

void Channel::onWritten(const beast::error_code& ec, std::size_t written) {
  isWriting_ = false;
  writing_.clear();
  trimChannelBuffer(writing_);
  if (state_ != State::kOpen) return;
  if (ec) {
    // The frames the socket took whole may be acted on; a frame cut short cannot be, as the
    // channel ends here and the server never reads its rest.
    for (const FrameEnd& f : writingEnds_) {
      if (f.end <= written) sentUpTo_ = f.id;
    }
    writingEnds_.clear();
    brokeOff("sending", ec);
    return;
  }
  writingEnds_.clear();
  sentUpTo_ = writingUpTo_;
  flush();
}

void Channel::read() {
  socket_.async_read_some(in_.prepare(frames_.readSize()),
                          [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
                            self->onRead(ec, n);
                          });
}

void Channel::onRead(const beast::error_code& ec, std::size_t n) {
  if (state_ != State::kOpen) return;
  if (ec) {
    brokeOff("reading the response", ec);
    return;
  }
  in_.commit(n);
  if (!takeFrames()) return;
  frames_.trim();
  read();
}

bool Channel::takeFrames() {
  for (;;) {
    channel::FrameHead head;
    std::string error;
    const auto next = frames_.next(head, error);
    if (next == ChannelFrameReader::Next::kNeedMore) return true;
    if (next == ChannelFrameReader::Next::kHead && head.type == channel::FrameType::kRequest) {
      error = "a server sends no requests";
    }
    if (!error.empty()) {
      malformed(error);
      return false;
    }
    if (head.type == channel::FrameType::kGoaway) {
      frames_.consume(head);  // a goaway has no payload
      goaway(head.id);
      if (state_ != State::kOpen) return false;
      continue;
    }
    Pending* p = find(head.id);
    if (p == nullptr) {
      // Answered too late: the request timed out already.
      frames_.skip(head);
      continue;
    }
    if (channel::minBodyBytes(head.payloadBytes) > core_.options.maxResponseBytes) {
      frames_.skip(head);
      complete(*p, tooLarge());
      if (state_ != State::kOpen) return false;
      continue;
    }
    const std::optional<std::string_view> payload = frames_.payload(head);
    if (!payload) return true;
    Response response;
    if (!channel::parseResponse(*payload, response, error)) {
      malformed(error);
      return false;
    }
    frames_.consume(head);
    if (response.body.size() > core_.options.maxResponseBytes) {
      complete(*p, tooLarge());
    } else {
      complete(*p, std::move(response));
    }
    if (state_ != State::kOpen) return false;
  }
}

void Channel::goaway(std::uint64_t lastId) {
  goaway_ = true;
  // The requests after `lastId` were not taken: they may go again, elsewhere or on a new
  // channel.
  const Status notTaken =
      unavailable(what() + ": the server is closing the channel and did not take the request");
  for (std::uint64_t id = std::max(lastId + 1, firstId_); id < nextId_; ++id) {
    if (Pending* p = find(id)) {
      complete(*p, Status(notTaken));
      if (state_ != State::kOpen) return;
    }
  }
  if (active_ == 0 && state_ == State::kOpen) end(notTaken, notTaken);
}

Status Channel::tooLarge() const {
  return {StatusCode::kResourceExhausted, what() + ": response body exceeds " +
                                              std::to_string(core_.options.maxResponseBytes) +
                                              " bytes"};
}

void Channel::malformed(const std::string& error) {
  const Status s = unavailable(what() + ": reading the response: malformed frame: " + error);
  end(s, s);
}

void Channel::brokeOff(std::string_view doing, const beast::error_code& ec) {
  const std::string text = ": " + std::string(doing) + ": " + ec.message();
  end(unavailable(what() + text), unavailable(what() + text + " (the request was not sent)"));
}

void Channel::end(const Status& sentCause, const Status& unsent) {
  const Status sent = sentCause.code() == StatusCode::kUnavailable
                          ? outcomeUnknown(sentCause.message() +
                                           " (the request went out and may have been processed)")
                          : sentCause;
  if (state_ == State::kEnded) return;
  // Ended mid-write (a read error, a deadline): the frames that end within the piece being
  // written may have gone out whole and been acted on.
  if (isWriting_) {
    for (const FrameEnd& f : writingEnds_) {
      if (f.end <= writtenSoFar_ + kWritePiece) sentUpTo_ = f.id;
    }
  }
  if (state_ == State::kOpen) core_.openNow.fetch_sub(1, std::memory_order_relaxed);
  state_ = State::kEnded;
  closeSocket();
  timer_.cancel();
  std::vector<Waiting> waiting = std::move(waiting_);
  waiting_.clear();
  for (Waiting& w : waiting) w.done(Status(unsent));
  while (!pending_.empty()) {
    Pending p = std::move(pending_.front());
    const std::uint64_t id = firstId_++;
    pending_.pop_front();
    if (!p.active) continue;
    --active_;
    p.done(Status(id <= sentUpTo_ ? sent : unsent));
  }
}

void Channel::closeSocket() {
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

void Channel::armTimer(Clock::time_point t) {
  if (armed_ && t >= armedFor_) return;
  armed_ = true;
  armedFor_ = t;
  const std::uint64_t generation = ++timerGeneration_;
  timer_.expires_at(t);  // a pending wait ends with operation_aborted
  timer_.async_wait([self = shared_from_this(), generation](const beast::error_code&) {
    if (generation != self->timerGeneration_ || self->state_ == State::kEnded) return;
    self->armed_ = false;
    self->onTimer();
  });
}

void Channel::onTimer() {
  const auto now = Clock::now();
  if (state_ == State::kConnecting || state_ == State::kUpgrading) {
    if (now >= connectDeadline_) {
      const Status s =
          unavailable(what() +
                      (state_ == State::kConnecting ? ": connecting: no connection within "
                                                    : ": asking for a channel: no answer within ") +
                      std::to_string(millis(core_.options.connectTimeout)) + " ms");
      end(s, s);
      return;
    }
    // Requests whose own deadline came first give up waiting; nothing of theirs was sent.
    std::vector<Waiting> due;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->deadline <= now) {
        due.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    for (Waiting& w : due) {
      w.done(unavailable(what() + ": connecting: no connection within " +
                         std::to_string(millis(w.timeout)) + " ms"));
    }
    Clock::time_point next = connectDeadline_;
    for (const Waiting& w : waiting_) next = std::min(next, w.deadline);
    armTimer(next);
    return;
  }
  if (state_ != State::kOpen) return;
  if (isWriting_ && now - writeStarted_ >= core_.options.requestTimeout) {
    const std::string text = ": sending: the server read nothing for " +
                             std::to_string(millis(core_.options.requestTimeout)) + " ms";
    end(unavailable(what() + text), unavailable(what() + text + " (the request was not sent)"));
    return;
  }
  while (!due_.empty() && due_.top().deadline <= now) {
    const Due d = due_.top();
    due_.pop();
    if (Pending* p = find(d.id)) {
      complete(*p, deadlineExceeded(what() + ": no response within " +
                                    std::to_string(millis(p->timeout)) + " ms"));
      if (state_ != State::kOpen) return;
    }
  }
  while (!due_.empty() && find(due_.top().id) == nullptr) due_.pop();
  if (active_ == 0 && !goaway_ && now - lastUse_ >= core_.options.idleTimeout) {
    // Idle: closed from our side, with nothing in flight, so nothing can be lost.
    const Status s = unavailable(what() + ": the channel was idle");
    end(s, s);
    return;
  }
  Clock::time_point next = due_.empty() ? Clock::time_point::max() : due_.top().deadline;
  if (active_ == 0) next = std::min(next, lastUse_ + core_.options.idleTimeout);
  if (isWriting_) next = std::min(next, writeStarted_ + core_.options.requestTimeout);
  if (next != Clock::time_point::max()) armTimer(next);
}

}  // namespace beast_detail

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary

// How long the destructor waits for the callbacks of the requests it failed.
constexpr std::chrono::seconds kAbortWait{5};

bool runsHere(const net::any_io_executor& exec) {
  const auto* loop = exec.target<net::io_context::executor_type>();
  return loop != nullptr && loop->running_in_this_thread();
}

}  // namespace

void ChannelClientCore::submit(std::size_t loop, Request&& request, ResponseCallback&& done) {
  if (closing.load(std::memory_order_acquire)) {
    done(cancelled(origin.url + " (channel): the client was destroyed"));
    return;
  }
  if (fallback.load(std::memory_order_acquire)) {
    plain->send(std::move(request), std::move(done));
    return;
  }
  Slot& slot = *slots[loop];
  if (!slot.channel || !slot.channel->takesRequests()) {
    slot.channel = std::make_shared<Channel>(*this, slot.exec);
  }
  slot.channel->submit(std::move(request), std::move(done));
}

StatusOr<std::unique_ptr<Client>> makeChannelClient(ClientOptions options) {
  StatusOr<Origin> origin = parseOrigin(options.baseUrl);
  if (!origin.ok()) return origin.status();
  auto plain = makeBeastClient(options);
  if (!plain.ok()) return plain.status();
  auto core = std::make_shared<ChannelClientCore>(std::move(options), std::move(*origin));
  core->plain = std::move(*plain);
  // A channel connects to an IP address, without TLS; anything else goes as plain HTTP.
  beast::error_code ec;
  net::ip::make_address(core->origin.host, ec);
  if (core->origin.tls || ec) core->fallBack();
  return std::unique_ptr<Client>(std::make_unique<ChannelClient>(std::move(core)));
}

void ChannelClientCore::close() {
  ChannelClientCore& c = *this;
  c.closing.store(true, std::memory_order_release);
  const bool onOurThread = c.io().runsInThisThread();
  // What the aborts count down; shared, as an abort may run after a wait that gave up.
  struct Countdown {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t left = 0;
  };
  auto countdown = std::make_shared<Countdown>();
  countdown->left = c.slots.size();
  for (auto& slot : c.slots) {
    // Holds the core: on another loop of shared threads the abort may run after this returns.
    auto abort = [keep = shared_from_this(), s = slot.get(), countdown] {
      if (s->channel) s->channel->abort();
      s->channel.reset();
      std::lock_guard lock(countdown->mu);
      if (--countdown->left == 0) countdown->cv.notify_all();
    };
    if (runsHere(slot->exec)) {
      abort();
    } else {
      net::post(slot->exec, std::move(abort));
    }
  }
  if (c.own) {
    c.own->impl().drain();
  } else if (!onOurThread) {
    // One of the loops' threads cannot wait for the others' aborts: they may wait on it.
    std::unique_lock lock(countdown->mu);
    countdown->cv.wait_for(lock, kAbortWait, [&countdown] { return countdown->left == 0; });
  }
  // The plain client is destroyed with the core, after the last abort.
}

void ChannelClientCore::send(Request request, ResponseCallback done) {
  if (fallback.load(std::memory_order_acquire)) {
    plain->send(std::move(request), std::move(done));
    return;
  }
  const std::size_t loop = io().pick();
  Slot& slot = *slots[loop];
  if (runsHere(slot.exec)) {
    submit(loop, std::move(request), std::move(done));
    return;
  }
  net::post(slot.exec, [core = shared_from_this(), loop, request = std::move(request),
                        done = std::move(done)]() mutable {
    core->submit(loop, std::move(request), std::move(done));
  });
}

StatusOr<std::unique_ptr<ResponseStream>> ChannelClientCore::openStream(Request request) {
  return plain->openStream(std::move(request));
}

}  // namespace kshard::http
