// ChannelClient's channel, opening: connects, asks for the upgrade and reads the answer; on 101
// the requests that waited go out, on a refusal they go as plain HTTP.
#include "http/internal/channel_client_core.h"

namespace kshard::http::beast_detail {

namespace {

// The longest answer to the upgrade request that is read before giving up on it.
constexpr std::size_t kUpgradeAnswerLimit = 64 * 1024;

}  // namespace

void Channel::connect() {
  state_ = State::kConnecting;
  connectDeadline_ = Clock::now() + core_.options.connectTimeout;
  armTimer(connectDeadline_);
  beast::error_code ec;
  const auto address = net::ip::make_address(core_.origin.host, ec);
  socket_.async_connect(
      tcp::endpoint(address, core_.origin.port),
      [self = shared_from_this()](const beast::error_code& e) { self->onConnected(e); });
}

void Channel::onConnected(const beast::error_code& ec) {
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

void Channel::readUpgradeAnswer() {
  socket_.async_read_some(in_.prepare(kReadBufferBytes),
                          [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
                            self->onUpgradeAnswer(ec, n);
                          });
}

void Channel::onUpgradeAnswer(const beast::error_code& ec, std::size_t n) {
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

int Channel::statusOf(std::string_view head) {
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

bool Channel::upgradesTo(std::string_view head, std::string_view protocol) {
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

void Channel::refused(bool forGood) {
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

}  // namespace kshard::http::beast_detail
