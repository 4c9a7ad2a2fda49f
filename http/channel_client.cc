#include "http/channel_client.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <queue>
#include <vector>

#include "http/beast_client.h"
#include "http/channel.h"
#include "http/internal/beast_stream.h"
#include "http/internal/channel_frame_reader.h"
#include "http/internal/io_threads_impl.h"
#include "http/internal/origin.h"

namespace kshard::http {

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary
using Clock = std::chrono::steady_clock;

// The longest answer to the upgrade request that is read before giving up on it.
constexpr std::size_t kUpgradeAnswerLimit = 64 * 1024;
// How long the destructor waits for the callbacks of the requests it failed.
constexpr std::chrono::seconds kAbortWait{5};

long long millis(Clock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

class Channel;

}  // namespace

struct ChannelClient::Core : std::enable_shared_from_this<ChannelClient::Core> {
  Core(ClientOptions o, Origin parsed) : options(std::move(o)), origin(std::move(parsed)) {
    if (options.ioThreads == nullptr) {
      own = std::make_unique<IoThreads>(IoThreadsOptions{
          std::max(1, options.threads), IoThreadsOptions::Model::kContextPerThread, {}});
    }
    for (std::size_t i = 0; i < io().loops(); ++i) {
      slots.push_back(std::make_unique<Slot>(io().connectionExecutor(i)));
    }
  }

  // The request that asks for a channel, with the caller's credential of the moment.
  std::string upgradeRequest() const {
    std::string out = "GET " + std::string(channel::kPath) + " HTTP/1.1\r\nHost: " +
                      origin.hostHeader + "\r\nUser-Agent: " + options.userAgent;
    if (options.channelAuthorization) {
      out += "\r\nAuthorization: " + options.channelAuthorization();
    }
    out += "\r\nConnection: Upgrade\r\nUpgrade: " + std::string(channel::kProtocol) + "\r\n\r\n";
    return out;
  }

  IoThreads::Impl& io() { return own ? own->impl() : options.ioThreads->impl(); }
  // What a channel holds to keep the core alive: needed with shared threads, which may run a
  // channel's last handlers after the client is gone. With its own threads the core outlives
  // every handler (the destructor runs them all), and holding it would be a cycle.
  std::shared_ptr<Core> keepAlive() { return own ? nullptr : shared_from_this(); }

  // On slot `loop`'s executor: hands the request to that loop's channel, opening one if needed.
  void submit(std::size_t loop, Request&& request, ResponseCallback&& done);
  // Sends by plain HTTP from now on.
  void fallBack() { fallback.store(true, std::memory_order_release); }

  const ClientOptions options;
  const Origin origin;
  std::atomic<bool> fallback{false};
  std::atomic<bool> closing{false};
  std::atomic<std::uint64_t> opened{0};
  std::atomic<std::size_t> openNow{0};
  // Plain HTTP: after a refused upgrade, for streams, and for origins a channel cannot reach.
  std::unique_ptr<BeastClient> plain;

  // One per loop: its current channel, touched only on `exec`.
  struct Slot {
    explicit Slot(net::any_io_executor e) : exec(std::move(e)) {}
    net::any_io_executor exec;
    std::shared_ptr<Channel> channel;
  };
  std::vector<std::unique_ptr<Slot>> slots;

  // Declared last: destroyed first, while what its leftover handlers reference still exists.
  std::unique_ptr<IoThreads> own;
};

namespace {

// One connection and the requests on it. Everything runs on the slot's executor.
class Channel : public std::enable_shared_from_this<Channel> {
 public:
  Channel(ChannelClient::Core& core, net::any_io_executor exec)
      : core_(core), keepCore_(core.keepAlive()), exec_(exec), socket_(exec), timer_(exec) {
    in_.reserve(kReadBufferBytes);
  }

  // False once it takes no new request (it broke, the server is closing it, or it was idle).
  bool takesRequests() const { return state_ != State::kEnded && !goaway_; }

  void submit(Request&& request, ResponseCallback&& done) {
    const auto timeout =
        request.timeout.count() > 0 ? request.timeout : core_.options.requestTimeout;
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

  // The client is going away: everything fails with Cancelled and the connection closes.
  void abort() {
    end(cancelled("the client was destroyed"), cancelled("the client was destroyed"));
  }

 private:
  enum class State { kNew, kConnecting, kUpgrading, kOpen, kEnded };

  struct Waiting {
    Request request;
    ResponseCallback done;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout;
  };
  struct Pending {
    ResponseCallback done;
    std::chrono::milliseconds timeout;
    bool active = false;
  };
  struct Due {
    Clock::time_point deadline;
    std::uint64_t id;
    bool operator>(const Due& o) const { return deadline > o.deadline; }
  };

  std::string what() const { return core_.origin.url + " (channel)"; }

  // --- opening --------------------------------------------------------------------------------

  void connect() {
    state_ = State::kConnecting;
    connectDeadline_ = Clock::now() + core_.options.connectTimeout;
    armTimer(connectDeadline_);
    beast::error_code ec;
    const auto address = net::ip::make_address(core_.origin.host, ec);
    socket_.async_connect(
        tcp::endpoint(address, core_.origin.port),
        [self = shared_from_this()](const beast::error_code& e) { self->onConnected(e); });
  }

  void onConnected(const beast::error_code& ec) {
    if (state_ != State::kConnecting) return;
    if (ec) {
      const Status s = unavailable(what() + ": connecting: " + ec.message());
      end(s, s);
      return;
    }
    beast::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    state_ = State::kUpgrading;
    upgrade_ = core_.upgradeRequest();
    net::async_write(socket_, net::buffer(upgrade_),
                     [self = shared_from_this()](const beast::error_code& e, std::size_t) {
                       if (self->state_ != State::kUpgrading) return;
                       if (e) {
                         const Status s =
                             unavailable(self->what() + ": asking for a channel: " + e.message());
                         self->end(s, s);
                         return;
                       }
                       self->readUpgradeAnswer();
                     });
  }

  void readUpgradeAnswer() {
    socket_.async_read_some(
        in_.prepare(kReadBufferBytes),
        [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
          self->onUpgradeAnswer(ec, n);
        });
  }

  void onUpgradeAnswer(const beast::error_code& ec, std::size_t n) {
    if (state_ != State::kUpgrading) return;
    if (ec) {
      const Status s = unavailable(what() + ": reading the answer to the upgrade: " + ec.message());
      end(s, s);
      return;
    }
    in_.commit(n);
    const std::string_view data(static_cast<const char*>(in_.data().data()), in_.size());
    const std::size_t headEnd = data.find("\r\n\r\n");
    if (headEnd == std::string_view::npos) {
      if (data.size() > kUpgradeAnswerLimit) {
        refused(/*forGood=*/true);
        return;
      }
      readUpgradeAnswer();
      return;
    }
    const std::string_view head = data.substr(0, headEnd + 2);
    const int status = statusOf(head);
    if (status == 503) {
      // A server that speaks channels and is stopping: nothing was sent, the requests may go
      // elsewhere; a later channel to it is tried again.
      const Status s = unavailable(what() + ": the server is stopping");
      end(s, s);
      return;
    }
    if (status == 401 || status == 403) {
      // A server that speaks channels and did not admit this caller: its requests go as plain
      // HTTP, where each gets the server's own answer, and a later one tries a channel again.
      refused(/*forGood=*/false);
      return;
    }
    if (status != 101 || !upgradesTo(head, channel::kProtocol)) {
      refused(/*forGood=*/true);
      return;
    }
    in_.consume(headEnd + 4);
    state_ = State::kOpen;
    core_.opened.fetch_add(1, std::memory_order_relaxed);
    core_.openNow.fetch_add(1, std::memory_order_relaxed);
    std::vector<Waiting> waiting = std::move(waiting_);
    waiting_.clear();
    for (Waiting& w : waiting) enqueue(w.request, std::move(w.done), w.deadline, w.timeout);
    if (!takeFrames()) return;
    read();
  }

  // The status of a response head "HTTP/1.x NNN[ reason]\r\n...", or 0 when it is not one.
  static int statusOf(std::string_view head) {
    if (head.size() <= 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ' ||
        (head[12] != ' ' && head[12] != '\r')) {
      return 0;
    }
    int status = 0;
    for (const char c : head.substr(9, 3)) {
      if (c < '0' || c > '9') return 0;
      status = status * 10 + (c - '0');
    }
    return status;
  }

  // True when an Upgrade field of `head` (the status line, then fields) names `protocol`.
  static bool upgradesTo(std::string_view head, std::string_view protocol) {
    for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;) {
      const std::size_t next = head.find("\r\n", at + 2);
      if (next == std::string_view::npos) break;
      const std::string_view line = head.substr(at + 2, next - at - 2);
      const std::size_t colon = line.find(':');
      if (colon != std::string_view::npos && equalsIgnoreCase(line.substr(0, colon), "upgrade") &&
          listHolds(line.substr(colon + 1), protocol)) {
        return true;
      }
      at = next;
    }
    return false;
  }

  // The origin refused the channel: its requests go as plain HTTP, and every later one too when
  // `forGood` (an origin that does not speak channels).
  void refused(bool forGood) {
    if (forGood) core_.fallBack();
    state_ = State::kEnded;
    closeSocket();
    timer_.cancel();
    std::vector<Waiting> waiting = std::move(waiting_);
    waiting_.clear();
    const auto now = Clock::now();
    for (Waiting& w : waiting) {
      if (w.deadline <= now) {
        w.done(unavailable(what() + ": no connection within " + std::to_string(millis(w.timeout)) +
                           " ms"));
        continue;
      }
      w.request.timeout = std::chrono::ceil<std::chrono::milliseconds>(w.deadline - Clock::now());
      core_.plain->send(std::move(w.request), std::move(w.done));
    }
  }

  // --- requests -------------------------------------------------------------------------------

  void enqueue(const Request& request, ResponseCallback&& done, Clock::time_point deadline,
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

  Pending* find(std::uint64_t id) {
    if (id < firstId_ || id - firstId_ >= pending_.size()) return nullptr;
    Pending& p = pending_[id - firstId_];
    return p.active ? &p : nullptr;
  }

  // Takes `p` out of what is in flight and calls its callback.
  void complete(Pending& p, StatusOr<Response>&& result) {
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

  void compactDue() {
    std::vector<Due> keep;
    keep.reserve(active_);
    while (!due_.empty()) {
      if (find(due_.top().id) != nullptr) keep.push_back(due_.top());
      due_.pop();
    }
    for (const Due& d : keep) due_.push(d);
  }

  void scheduleFlush() {
    if (isWriting_ || flushPosted_) return;
    flushPosted_ = true;
    // After the handlers the loop has ready: the requests they send go in the same write.
    net::post(exec_, [self = shared_from_this()] {
      self->flushPosted_ = false;
      self->flush();
    });
  }

  void flush() {
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

  void onWritten(const beast::error_code& ec, std::size_t written) {
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

  void read() {
    socket_.async_read_some(in_.prepare(frames_.readSize()),
                            [self = shared_from_this()](const beast::error_code& ec,
                                                        std::size_t n) { self->onRead(ec, n); });
  }

  void onRead(const beast::error_code& ec, std::size_t n) {
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

  // Delivers every whole frame in `in_`; false when the channel ended meanwhile.
  bool takeFrames() {
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

  void goaway(std::uint64_t lastId) {
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

  Status tooLarge() const {
    return {StatusCode::kResourceExhausted, what() + ": response body exceeds " +
                                                std::to_string(core_.options.maxResponseBytes) +
                                                " bytes"};
  }

  void malformed(const std::string& error) {
    const Status s = unavailable(what() + ": reading the response: malformed frame: " + error);
    end(s, s);
  }

  void brokeOff(std::string_view doing, const beast::error_code& ec) {
    const std::string text = ": " + std::string(doing) + ": " + ec.message();
    end(unavailable(what() + text), unavailable(what() + text + " (the request was not sent)"));
  }

  // Ends the channel: requests that went out fail with `sent`, the rest with `unsent`. A request
  // that went out may have been acted on, so a transport failure is reported for it as
  // OutcomeUnknown, never as Unavailable (which callers may retry).
  void end(const Status& sentCause, const Status& unsent) {
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

  void closeSocket() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // --- deadlines ------------------------------------------------------------------------------

  void armTimer(Clock::time_point t) {
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

  void onTimer() {
    const auto now = Clock::now();
    if (state_ == State::kConnecting || state_ == State::kUpgrading) {
      if (now >= connectDeadline_) {
        const Status s = unavailable(what() +
                                     (state_ == State::kConnecting
                                          ? ": connecting: no connection within "
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

  ChannelClient::Core& core_;
  const std::shared_ptr<ChannelClient::Core> keepCore_;  // see Core::keepAlive
  const net::any_io_executor exec_;
  tcp::socket socket_;
  net::steady_timer timer_;
  State state_ = State::kNew;
  bool goaway_ = false;

  beast::flat_buffer in_;
  ChannelFrameReader frames_{in_};  // reads the answers out of in_
  std::string out_;                 // request frames to write next
  std::string writing_;             // being written
  std::string upgrade_;             // the upgrade request, while it is written
  struct FrameEnd {
    std::uint64_t id;
    std::size_t end;  // offset just past the frame, in out_ or writing_
  };
  std::vector<FrameEnd> outEnds_;
  std::vector<FrameEnd> writingEnds_;
  static constexpr std::size_t kWritePiece = 1u << 20;
  std::size_t writtenSoFar_ = 0;  // of writing_, before the piece being written
  bool isWriting_ = false;
  bool flushPosted_ = false;

  std::vector<Waiting> waiting_;  // until the channel opens
  std::deque<Pending> pending_;   // by id, from firstId_
  std::uint64_t firstId_ = 1;
  std::uint64_t nextId_ = 1;
  std::uint64_t writingUpTo_ = 0;
  Clock::time_point writeStarted_;
  std::uint64_t sentUpTo_ = 0;  // requests up to this id were written whole
  std::size_t active_ = 0;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;  // answered ones go lazily

  Clock::time_point lastUse_ = Clock::now();
  Clock::time_point connectDeadline_;
  net::steady_timer::time_point armedFor_;
  bool armed_ = false;
  std::uint64_t timerGeneration_ = 0;
};

bool runsHere(const net::any_io_executor& exec) {
  const auto* loop = exec.target<net::io_context::executor_type>();
  return loop != nullptr && loop->running_in_this_thread();
}

}  // namespace

void ChannelClient::Core::submit(std::size_t loop, Request&& request, ResponseCallback&& done) {
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

StatusOr<std::unique_ptr<ChannelClient>> ChannelClient::create(ClientOptions options) {
  StatusOr<Origin> origin = parseOrigin(options.baseUrl);
  if (!origin.ok()) return origin.status();
  auto plain = BeastClient::create(options);
  if (!plain.ok()) return plain.status();
  auto core = std::make_shared<Core>(std::move(options), std::move(*origin));
  core->plain = std::move(*plain);
  // A channel connects to an IP address, without TLS; anything else goes as plain HTTP.
  beast::error_code ec;
  net::ip::make_address(core->origin.host, ec);
  if (core->origin.tls || ec) core->fallBack();
  return std::unique_ptr<ChannelClient>(new ChannelClient(std::move(core)));
}

ChannelClient::ChannelClient(std::shared_ptr<Core> core) : core_(std::move(core)) {}

ChannelClient::~ChannelClient() {
  Core& c = *core_;
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
    auto abort = [keep = core_, s = slot.get(), countdown] {
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

void ChannelClient::send(Request request, ResponseCallback done) {
  Core& c = *core_;
  if (c.fallback.load(std::memory_order_acquire)) {
    c.plain->send(std::move(request), std::move(done));
    return;
  }
  const std::size_t loop = c.io().pick();
  Core::Slot& slot = *c.slots[loop];
  if (runsHere(slot.exec)) {
    c.submit(loop, std::move(request), std::move(done));
    return;
  }
  net::post(slot.exec,
            [core = core_, loop, request = std::move(request), done = std::move(done)]() mutable {
              core->submit(loop, std::move(request), std::move(done));
            });
}

StatusOr<std::unique_ptr<ResponseStream>> ChannelClient::openStream(Request request) {
  return core_->plain->openStream(std::move(request));
}

bool ChannelClient::usesChannels() const {
  return !core_->fallback.load(std::memory_order_acquire);
}

std::uint64_t ChannelClient::channelsOpened() const {
  return core_->opened.load(std::memory_order_relaxed);
}

std::size_t ChannelClient::openChannels() const {
  return core_->openNow.load(std::memory_order_relaxed);
}

}  // namespace kshard::http
