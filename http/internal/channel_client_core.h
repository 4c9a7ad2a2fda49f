// Internal to ChannelClient (channel_client.cc, channel_client_open.cc): the client's core, with
// one channel per loop of the I/O threads, and the channel: one connection and the requests on
// it. Opening it (connecting, asking for the upgrade, reading the answer) is in
// channel_client_open.cc; sending requests, reading answers and the deadlines in
// channel_client.cc. Never include it from a public header.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "http/beast_client.h"
#include "http/channel.h"
#include "http/channel_client.h"
#include "http/internal/beast_stream.h"
#include "http/internal/channel_frame_reader.h"
#include "http/internal/core_client.h"
#include "http/internal/io_threads_impl.h"
#include "http/internal/origin.h"

namespace kshard::http {

namespace beast_detail {
class Channel;
}  // namespace beast_detail

struct ChannelClientCore;
// What makeChannelClient makes.
using ChannelClient = CoreClient<ChannelClientCore>;

struct ChannelClientCore : std::enable_shared_from_this<ChannelClientCore> {
  ChannelClientCore(ClientOptions o, Origin parsed)
      : options(std::move(o)), origin(std::move(parsed)) {
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
    std::string out = "GET " + std::string(channel::kPath) +
                      " HTTP/1.1\r\nHost: " + origin.hostHeader +
                      "\r\nUser-Agent: " + options.userAgent;
    if (options.channelAuthorization) {
      out += "\r\nAuthorization: " + options.channelAuthorization();
    }
    out += "\r\nConnection: Upgrade\r\nUpgrade: " + std::string(channel::kProtocol) + "\r\n\r\n";
    return out;
  }

  // The client's work (CoreClient); close() fails what is in flight with Cancelled.
  void send(Request request, ResponseCallback done);
  StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request);
  void close();

  // False once requests go as plain HTTP (see http/channel_client.h).
  bool usesChannels() const { return !fallback.load(std::memory_order_acquire); }
  // How many channels were opened (a connection and its upgrade), over the client's life.
  std::uint64_t channelsOpened() const { return opened.load(std::memory_order_relaxed); }
  // How many are open now.
  std::size_t openChannels() const { return openNow.load(std::memory_order_relaxed); }

  IoThreads::Impl& io() { return own ? own->impl() : options.ioThreads->impl(); }
  // What a channel holds to keep the core alive: needed with shared threads, which may run a
  // channel's last handlers after the client is gone. With its own threads the core outlives
  // every handler (the destructor runs them all), and holding it would be a cycle.
  std::shared_ptr<ChannelClientCore> keepAlive() { return own ? nullptr : shared_from_this(); }

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
  std::unique_ptr<Client> plain;

  // One per loop: its current channel, touched only on `exec`.
  struct Slot {
    explicit Slot(beast_detail::net::any_io_executor e) : exec(std::move(e)) {}
    beast_detail::net::any_io_executor exec;
    std::shared_ptr<beast_detail::Channel> channel;
  };
  std::vector<std::unique_ptr<Slot>> slots;

  // Declared last: destroyed first, while what its leftover handlers reference still exists.
  std::unique_ptr<IoThreads> own;
};

namespace beast_detail {

using Clock = std::chrono::steady_clock;

// One connection and the requests on it. Everything runs on the slot's executor.
class Channel : public std::enable_shared_from_this<Channel> {
 public:
  Channel(ChannelClientCore& core, net::any_io_executor exec)
      : core_(core), keepCore_(core.keepAlive()), exec_(exec), socket_(exec), timer_(exec) {
    in_.reserve(kReadBufferBytes);
  }

  // False once it takes no new request (it broke, the server is closing it, or it was idle).
  bool takesRequests() const { return state_ != State::kEnded && !goaway_; }

  void submit(Request&& request, ResponseCallback&& done);

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

  // --- opening (channel_client_open.cc) -------------------------------------------------------

  void connect();
  void onConnected(const beast::error_code& ec);
  void readUpgradeAnswer();
  void onUpgradeAnswer(const beast::error_code& ec, std::size_t n);

  // The status of a response head "HTTP/1.x NNN[ reason]\r\n...", or 0 when it is not one.
  static int statusOf(std::string_view head);

  // True when an Upgrade field of `head` (the status line, then fields) names `protocol`.
  static bool upgradesTo(std::string_view head, std::string_view protocol);

  // The origin refused the channel: its requests go as plain HTTP, and every later one too when
  // `forGood` (an origin that does not speak channels).
  void refused(bool forGood);

  // --- requests (channel_client.cc) -----------------------------------------------------------

  void enqueue(const Request& request, ResponseCallback&& done, Clock::time_point deadline,
               std::chrono::milliseconds timeout);
  Pending* find(std::uint64_t id);

  // Takes `p` out of what is in flight and calls its callback.
  void complete(Pending& p, StatusOr<Response>&& result);
  void compactDue();
  void scheduleFlush();
  void flush();
  void onWritten(const beast::error_code& ec, std::size_t written);
  void read();
  void onRead(const beast::error_code& ec, std::size_t n);

  // Delivers every whole frame in `in_`; false when the channel ended meanwhile.
  bool takeFrames();
  void goaway(std::uint64_t lastId);
  Status tooLarge() const;
  void malformed(const std::string& error);
  void brokeOff(std::string_view doing, const beast::error_code& ec);

  // Ends the channel: requests that went out fail with `sent`, the rest with `unsent`. A request
  // that went out may have been acted on, so a transport failure is reported for it as
  // OutcomeUnknown, never as Unavailable (which callers may retry).
  void end(const Status& sentCause, const Status& unsent);
  void closeSocket();

  // --- deadlines ------------------------------------------------------------------------------

  void armTimer(Clock::time_point t);
  void onTimer();

  ChannelClientCore& core_;
  const std::shared_ptr<ChannelClientCore> keepCore_;  // see Core::keepAlive
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

inline long long millis(Clock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace beast_detail

}  // namespace kshard::http
