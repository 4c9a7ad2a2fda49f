// Internal to the Boost.Beast adapter (beast_server.cc, beast_client.cc): a TCP stream that may
// carry TLS, so one session or connection type serves both. Never include it from a public header.
#pragma once

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace kshard::http::beast_detail {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

class AnyStream {
 public:
  explicit AnyStream(beast::tcp_stream plain) : plain_(std::move(plain)) {}
  AnyStream(beast::tcp_stream plain, ssl::context& ctx)
      : tls_(std::make_unique<beast::ssl_stream<beast::tcp_stream>>(std::move(plain), ctx)) {}

  bool isTls() const { return tls_ != nullptr; }
  beast::ssl_stream<beast::tcp_stream>& tls() { return *tls_; }
  beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
  tcp::socket& socket() { return tcp().socket(); }

  // Calls `fn` with the concrete stream (TLS or plain) for Beast's read and write algorithms.
  template <typename Fn>
  void visit(Fn&& fn) {
    if (tls_) {
      fn(*tls_);
    } else {
      fn(*plain_);
    }
  }

  // Closes the socket at once; pending operations complete with operation_aborted.
  void close() {
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().close();
  }

 private:
  std::optional<beast::tcp_stream> plain_;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls_;
};

// A connection's deadline that costs nothing to move. Beast's stream arms a timer before every
// read and write and cancels it after, and each cancelled wait still runs a handler: four per
// message and connection. This keeps one timer per connection, armed when it has no earlier wait
// pending and re-armed only when it fires before the deadline, which has moved on meanwhile.
// Everything runs on the connection's executor, the timer's handler included; once the deadline
// passes, the callback given to onExpire() runs there (it closes the connection).
class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Watchdog(const net::any_io_executor& exec) : state_(std::make_shared<State>(exec)) {}
  ~Watchdog() { state_->timer.cancel(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void onExpire(std::function<void()> fn) { state_->onExpire = std::move(fn); }
  void expiresAt(Clock::time_point t) {
    state_->deadline = t;
    if (!state_->armed || t < state_->armedFor) arm(state_, t);
  }
  void expiresAfter(Clock::duration d) { expiresAt(Clock::now() + d); }
  void never() { state_->deadline = Clock::time_point::max(); }

 private:
  struct State {
    explicit State(const net::any_io_executor& exec) : timer(exec) {}
    net::steady_timer timer;
    Clock::time_point deadline = Clock::time_point::max();
    Clock::time_point armedFor{};
    bool armed = false;
    std::uint64_t generation = 0;  // of the pending wait; an older wait's handler does nothing
    std::function<void()> onExpire;
  };

  static void arm(const std::shared_ptr<State>& s, Clock::time_point t) {
    s->armed = true;
    s->armedFor = t;
    const std::uint64_t generation = ++s->generation;
    s->timer.expires_at(t);  // a pending wait ends with operation_aborted
    s->timer.async_wait([weak = std::weak_ptr<State>(s), generation](const beast::error_code& ec) {
      const auto state = weak.lock();
      if (!state || state->generation != generation) return;
      state->armed = false;
      if (ec || state->deadline == Clock::time_point::max()) return;
      if (Clock::now() < state->deadline) {
        arm(state, state->deadline);
        return;
      }
      state->deadline = Clock::time_point::max();
      if (state->onExpire) state->onExpire();
    });
  }

  std::shared_ptr<State> state_;
};

// Writes a message kept as its head (start line and fields) and its body, in one gather write,
// and calls `done(error_code, bytes)`. Both strings must live until then.
template <typename Handler>
void asyncWriteMessage(AnyStream& stream, const std::string& head, const std::string& body,
                       Handler&& done) {
  const std::array<net::const_buffer, 2> buffers{net::buffer(head), net::buffer(body)};
  stream.visit(
      [&buffers, &done](auto& s) { net::async_write(s, buffers, std::forward<Handler>(done)); });
}

// What a connection's read buffer holds from the start: a message of this size (headers and body)
// arrives in one read. Beast reads at most the buffer's free space, and no less than 512 bytes,
// so an unreserved buffer took three reads, three timer updates and three trips through the event
// loop for a 1 KiB message.
constexpr std::size_t kReadBufferBytes = 8 * 1024;

// Parses into `parser`, whose header is complete, the bytes `buffer` already holds, without I/O.
// Beast's async_read would parse them too, but only after a trip through the event loop. Returns
// what the parser reported; `need_more` (the message goes on beyond the buffer) is no error.
template <bool isRequest>
beast::error_code parseBuffered(boost::beast::http::basic_parser<isRequest>& parser,
                                beast::flat_buffer& buffer) {
  beast::error_code ec;
  parser.eager(true);
  while (!parser.is_done() && buffer.size() > 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == boost::beast::http::error::need_more) return {};
    if (ec || used == 0) break;
  }
  return ec;
}

// Boost 1.74's Beast speaks boost::string_view; kshard speaks std::string_view.
inline std::string_view toStd(beast::string_view s) { return {s.data(), s.size()}; }
inline beast::string_view toBeast(std::string_view s) { return {s.data(), s.size()}; }

// "ip:port", with brackets around IPv6 addresses.
inline std::string formatEndpoint(const tcp::endpoint& ep) {
  const std::string ip = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + ip + "]" : ip) + ":" + std::to_string(ep.port());
}

}  // namespace kshard::http::beast_detail
