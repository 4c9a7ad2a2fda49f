// Internal to the Boost.Beast adapter (the server's sessions, the clients' connections): a TCP
// stream that may carry TLS, so one session or connection type serves both. Never include it from
// a public header.
#pragma once

#include <algorithm>
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
#include <string_view>
#include <type_traits>
#include <utility>

#include "http/channel.h"

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

  // Calls `fn` with what reads and writes go through when a Watchdog keeps the deadline: the TLS
  // stream, or for a plain connection the socket itself, below the Beast stream's own timer (whose
  // operation layers, work guards and executor copies cost more than the system call they wrap).
  template <typename Fn>
  void visitIo(Fn&& fn) {
    if (tls_) {
      fn(*tls_);
    } else {
      fn(plain_->socket());
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
void asyncWriteMessage(AnyStream& stream, const std::string& head, std::string_view body,
                       Handler&& done) {
  const std::array<net::const_buffer, 2> buffers{net::buffer(head), net::buffer(body)};
  stream.visitIo(
      [&buffers, &done](auto& s) { net::async_write(s, buffers, std::forward<Handler>(done)); });
}

// What a connection's read buffer holds from the start: a message of this size (headers and body)
// arrives in one read. A read asks for at most the buffer's free space, and no less than 512
// bytes (beast::read_size), so an unreserved buffer took three reads and three trips through the
// event loop for a 1 KiB message.
constexpr std::size_t kReadBufferBytes = 8 * 1024;

// A channel (http/channel.h) reads a whole frame into its buffer before parsing it, and appends
// many frames to its output: after a large message, room beyond this is given back, so that a
// channel per peer and loop does not keep a body's worth of memory each.
constexpr std::size_t kChannelBufferKeepBytes = 64 * 1024;

// Gives back what `buffer` holds beyond kChannelBufferKeepBytes once it is empty.
inline void trimChannelBuffer(beast::flat_buffer& buffer) {
  if (buffer.size() == 0 && buffer.capacity() > kChannelBufferKeepBytes) {
    buffer.shrink_to_fit();
    buffer.reserve(kReadBufferBytes);
  }
}
inline void trimChannelBuffer(std::string& buffer) {
  if (buffer.empty() && buffer.capacity() > kChannelBufferKeepBytes) std::string().swap(buffer);
}

// What a channel's next read asks `buffer` for: a usual read, or the rest of the frame that is
// coming in when that is larger. `skip`: bytes of a refused frame still to discard.
inline std::size_t channelReadSize(const beast::flat_buffer& buffer, std::size_t skip) {
  const std::size_t have = buffer.size();
  if (skip > 0 || have < channel::kHeadBytes) return kReadBufferBytes;
  const std::size_t frame =
      channel::frameBytes(std::string_view(static_cast<const char*>(buffer.data().data()), have));
  return frame > have ? std::max(kReadBufferBytes, frame - have) : kReadBufferBytes;
}

// Discards up to `skip` bytes from `buffer` (the rest of a frame nobody takes); true once none
// are left to discard.
inline bool skipChannelBytes(beast::flat_buffer& buffer, std::size_t& skip) {
  const std::size_t n = std::min(skip, buffer.size());
  buffer.consume(n);
  skip -= n;
  return skip == 0;
}

// Reads into `buffer` and parses into `parser` until `done(parser)` holds, then calls
// `handler(error_code)`. What the buffer already holds is parsed first; each read is one
// async_read_some on stream.visitIo(), instead of Beast's composed read operations. The parser's
// eager setting is the caller's: not eager, it stops after the header. Errors are Beast's: the
// parser's, end_of_stream when the peer closed before sending anything, partial_message when it
// closed in the middle of a message, or the read's.
//
// With `readable` (a plain connection whose wait for readability fired), the bytes are read at
// once, without a trip through the event loop, until the socket runs dry; the socket must be in
// non-blocking mode.
template <typename Parser, typename Done, typename Handler>
class ReadUntil {
 public:
  ReadUntil(AnyStream& stream, beast::flat_buffer& buffer, Parser& parser, Done done,
            Handler handler)
      : stream_(stream),
        buffer_(buffer),
        parser_(parser),
        done_(std::move(done)),
        handler_(std::move(handler)) {}

  void start(bool readable) {
    readable_ = readable && !stream_.isTls();
    if (parse()) next();
  }

  void operator()(const beast::error_code& ec, std::size_t n) {
    if (consume(ec, n)) next();
  }

 private:
  // Reads on: at once while the socket is known to hold bytes, then asynchronously.
  void next() {
    while (readable_) {
      beast::error_code ec;
      const std::size_t n = stream_.socket().read_some(buffer_.prepare(readSize()), ec);
      if (ec == net::error::would_block) {
        readable_ = false;
        break;
      }
      if (!consume(ec, n)) return;
    }
    const std::size_t size = readSize();
    stream_.visitIo(
        [this, size](auto& s) { s.async_read_some(buffer_.prepare(size), std::move(*this)); });
  }

  // Takes in a read's outcome; false once the handler was called.
  bool consume(beast::error_code ec, std::size_t n) {
    if (ec == net::error::eof) {
      if (!parser_.got_some()) {
        handler_(beast::error_code(boost::beast::http::error::end_of_stream));
        return false;
      }
      ec = {};
      parser_.put_eof(ec);  // partial_message unless the message is complete
      handler_(ec);
      return false;
    }
    if (ec) {
      handler_(ec);
      return false;
    }
    buffer_.commit(n);
    return parse();
  }

  // Parses what the buffer holds; false once the handler was called.
  bool parse() {
    beast::error_code ec;
    while (!done_(parser_) && buffer_.size() > 0) {
      const std::size_t used = parser_.put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == boost::beast::http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) break;
    }
    if (ec || done_(parser_)) {
      handler_(ec);
      return false;
    }
    return true;
  }

  std::size_t readSize() { return beast::read_size(buffer_, 64 * 1024); }

  AnyStream& stream_;
  beast::flat_buffer& buffer_;
  Parser& parser_;
  Done done_;
  Handler handler_;
  bool readable_ = false;
};

// See ReadUntil. `parser` is a Beast basic_parser or anything with the same interface
// (MessageParser).
template <typename Parser, typename Done, typename Handler>
void asyncReadUntil(AnyStream& stream, beast::flat_buffer& buffer, Parser& parser, Done done,
                    Handler&& handler, bool readable = false) {
  ReadUntil<Parser, Done, std::decay_t<Handler>>(stream, buffer, parser, std::move(done),
                                                 std::forward<Handler>(handler))
      .start(readable);
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
