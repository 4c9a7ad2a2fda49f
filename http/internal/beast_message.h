// Internal to the Boost.Beast adapter (beast_http_session.cc, beast_client*.cc): reads and writes
// kshard's Request and Response directly, without Beast's message and field containers. A simple
// head is read by fast_head.h, any other by Beast's parser, which also judges every malformed
// one. Never include it from a public header.
//
// Why: a forwarded message crossed three header containers per hop (Beast's parsed fields, kshard's
// Headers, Beast's fields to serialize), and Beast's serializer walks a view of a dozen buffers per
// message. Writing the head as one string and the body as a second buffer costs one allocation
// and one gather write.
#pragma once

#include <algorithm>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "http/internal/fast_head.h"
#include "http/message.h"

namespace kshard::http::beast_detail {

// Room for this many bytes of fields from the start.
inline constexpr std::size_t kFieldsReserved = 512;

// Reserves room for a body of `length` bytes, at most 1 MiB (the length is the peer's word).
template <typename Message>
void reserveBody(Message& message, std::uint64_t length) {
  message.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(length, 1u << 20)));
}

// Fills a Request (isRequest) or a Response from Beast's parser callbacks: MessageParser's
// fallback, for the heads fast_head declines.
template <bool isRequest>
class BeastParser final : public boost::beast::http::basic_parser<isRequest> {
 public:
  using Message = std::conditional_t<isRequest, Request, Response>;

  explicit BeastParser(Message& message) : message_(message) {}

  // Valid once the header is done.
  unsigned version() const { return version_; }
  const std::string& methodText() const { return methodText_; }
  bool expectsContinue() const { return expectContinue_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;
  using verb = boost::beast::http::verb;

  static std::string str(string_view s) { return {s.data(), s.size()}; }
  static std::string_view toStd(string_view s) { return {s.data(), s.size()}; }

  void on_request_impl(verb, string_view method, string_view target, int version,
                       error_code&) override {
    if constexpr (isRequest) {
      message_.headers.reserve(kFieldsReserved);
      methodText_ = str(method);
      message_.target = str(target);
    }
    version_ = static_cast<unsigned>(version);
  }
  void on_response_impl(int code, string_view, int version, error_code&) override {
    if constexpr (!isRequest) {
      message_.headers.reserve(kFieldsReserved);
      message_.status = code;
    }
    version_ = static_cast<unsigned>(version);
  }
  void on_field_impl(field name, string_view nameText, string_view value, error_code&) override {
    if (isRequest && name == field::expect &&
        equalsIgnoreCase({value.data(), value.size()}, "100-continue")) {
      expectContinue_ = true;
    }
    if (name == field::content_length || name == field::transfer_encoding) return;  // framing
    message_.headers.addParsed(toStd(nameText), toStd(value));
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    // Beast has checked a declared length against body_limit for requests only (Boost 1.74); the
    // reservation is capped either way.
    if (length) reserveBody(message_, *length);
  }
  std::size_t on_body_impl(string_view body, error_code&) override {
    message_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    message_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  Message& message_;
  unsigned version_ = 11;
  std::string methodText_;
  bool expectContinue_ = false;
};

// Reads a Request (isRequest) or a Response, with the interface of Beast's basic_parser that the
// adapters use. The fast path needs the whole head in the first buffer it is given (one read,
// nearly always); a head that comes in pieces is Beast's. The message's headers leave out its
// framing fields (Content-Length, Transfer-Encoding): its body is whole, and whoever writes it on
// writes their own (requestHead, responseHead), so a forwarded message's fields go out as one copy.
// A head in the simple form that the data path carries (fast_head.h) is read by fast_head, and its
// body, framed by Content-Length or absent, is copied here; any other head, and every error but a
// head over the limit, is Beast's parser's, which then reads the message from its first byte.
template <bool isRequest>
class MessageParser {
 public:
  using Message = std::conditional_t<isRequest, Request, Response>;

  MessageParser() = default;
  MessageParser(const MessageParser&) = delete;
  MessageParser& operator=(const MessageParser&) = delete;

  // Settings, as Beast's; skip() before the first put().
  void header_limit(std::uint32_t n) { headerLimit_ = n; }
  // May be lowered once the header is done, before the body is read (a route's own limit).
  void body_limit(std::uint64_t n) {
    bodyLimit_ = n;
    if (state_ == State::kBeast) beast_.body_limit(n);
  }
  void eager(bool v) {
    eager_ = v;
    if (state_ == State::kBeast) beast_.eager(v);
  }
  void skip(bool v) { skip_ = v; }

  std::size_t put(boost::asio::const_buffer buffer, boost::beast::error_code& ec);
  void put_eof(boost::beast::error_code& ec);

  bool got_some() const { return state_ == State::kBeast ? beast_.got_some() : gotSome_; }
  bool is_header_done() const {
    return state_ == State::kBeast ? beast_.is_header_done() : state_ != State::kHead;
  }
  bool is_done() const {
    return state_ == State::kBeast ? beast_.is_done() : state_ == State::kDone;
  }
  // Valid once the header is done.
  bool keep_alive() const {
    return state_ == State::kBeast ? beast_.keep_alive() : head_.keepAlive();
  }
  bool need_eof() const { return state_ == State::kBeast && beast_.need_eof(); }
  boost::optional<std::uint64_t> content_length() const {
    if (state_ == State::kBeast) return beast_.content_length();
    return head_.contentLength ? boost::optional<std::uint64_t>(*head_.contentLength) : boost::none;
  }
  unsigned version() const { return state_ == State::kBeast ? beast_.version() : head_.version; }
  // Requests: the method, when kshard knows it, and its text as received.
  std::optional<Method> method() const { return parseMethod(methodText()); }
  std::string_view methodText() const {
    return state_ == State::kBeast ? std::string_view(beast_.methodText()) : methodText_;
  }
  // Requests: "Expect: 100-continue" was among the fields.
  bool expectsContinue() const {
    return state_ == State::kBeast ? beast_.expectsContinue() : head_.expectContinue;
  }
  // True when Beast's parser reads this message (for tests).
  bool fellBack() const { return state_ == State::kBeast; }

  Message& get() { return message_; }

 private:
  enum class State { kHead, kBody, kDone, kBeast };

  enum class HeadRead { kRead, kNeedMore, kOverLimit, kBeast };
  HeadRead readHead(std::string_view in);
  std::size_t toBeast(boost::asio::const_buffer buffer, boost::beast::error_code& ec);

  Message message_;
  BeastParser<isRequest> beast_{message_};
  fast_head::Head head_;
  std::string methodText_;       // a copy: head_'s views point into the read buffer
  std::uint64_t remaining_ = 0;  // bytes of the body still to come
  std::uint64_t bodyLimit_ = 8 * 1024 * 1024;
  std::uint32_t headerLimit_ = 8192;
  State state_ = State::kHead;
  bool eager_ = false;  // as Beast's: stop after the header
  bool skip_ = false;
  bool gotSome_ = false;
};

// The request line and header fields of `request`, ending with the blank line; the body goes
// after it unchanged. Content-Length is computed (a caller's framing fields are dropped); Host and
// User-Agent are added when the request has none (an empty `userAgent` adds none).
std::string requestHead(const Request& request, std::string_view host, std::string_view userAgent);

// The status line and header fields of a response with a body of `bodySize` bytes, ending with
// the blank line. `close` asks for "Connection: close" (HTTP/1.1) or leaves out "Connection:
// keep-alive" (HTTP/1.0). 1xx, 204 and 304 answers carry no Content-Length. The handler's framing
// and Connection fields are dropped.
std::string responseHead(int status, const Headers& headers, std::size_t bodySize, unsigned version,
                         bool close);
// The same, written over `out`, whose room a connection keeps from one answer to the next.
void writeResponseHead(std::string& out, int status, const Headers& headers, std::size_t bodySize,
                       unsigned version, bool close);

// True when a response of this status carries no body (1xx, 204, 304).
bool statusHasNoBody(int status);

// True when the handler's headers ask to close the connection ("Connection: close").
bool asksToClose(const Headers& headers);

template <bool isRequest>
std::size_t MessageParser<isRequest>::put(boost::asio::const_buffer buffer,
                                          boost::beast::error_code& ec) {
  if (state_ == State::kBeast) return beast_.put(buffer, ec);
  ec = {};
  const auto* const data = static_cast<const char*>(buffer.data());
  const std::size_t size = buffer.size();
  std::size_t used = 0;
  if (state_ == State::kHead) {
    if (size == 0) {
      ec = boost::beast::http::error::need_more;
      return 0;
    }
    gotSome_ = true;
    switch (readHead(std::string_view(data, size))) {
      case HeadRead::kRead:
        break;
      case HeadRead::kOverLimit:
        ec = boost::beast::http::error::header_limit;
        return 0;
      case HeadRead::kNeedMore:
        // A head that comes in pieces is Beast's: it goes on from where each piece ended (read
        // again from the start at each piece, a head sent a byte at a time would cost quadratic
        // time), and it reports a malformed head before the rest of it arrives.
      case HeadRead::kBeast:
        return toBeast(buffer, ec);
    }
    used = head_.size;
    if (!eager_) return used;
  }
  if (state_ == State::kBody) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, size - used));
    message_.body.append(data + used, n);
    remaining_ -= n;
    used += n;
    if (remaining_ == 0) state_ = State::kDone;
  }
  return used;
}

template <bool isRequest>
void MessageParser<isRequest>::put_eof(boost::beast::error_code& ec) {
  if (state_ == State::kBeast) {
    beast_.put_eof(ec);
    return;
  }
  // Every message fast_head reads is framed without the end of the stream.
  ec = state_ == State::kDone
           ? boost::beast::error_code()
           : boost::beast::error_code(boost::beast::http::error::partial_message);
}

template <bool isRequest>
typename MessageParser<isRequest>::HeadRead MessageParser<isRequest>::readHead(
    std::string_view in) {
  message_.headers.reserve(kFieldsReserved);
  fast_head::Outcome outcome;
  if constexpr (isRequest) {
    outcome = fast_head::parseRequestHead(in, headerLimit_, head_, message_.headers);
  } else {
    outcome = fast_head::parseResponseHead(in, headerLimit_, head_, message_.headers);
  }
  std::uint64_t length = 0;
  bool declined = outcome != fast_head::Outcome::kParsed;
  if (outcome == fast_head::Outcome::kParsed) {
    if constexpr (isRequest) {
      length = head_.contentLength.value_or(0);
    } else if (!skip_ && head_.status != 204 && head_.status != 304) {
      // A response without a length runs to the end of the stream: Beast's to read.
      declined = !head_.contentLength;
      length = head_.contentLength.value_or(0);
    }
    // Beast's parser reports a declared length over the limit.
    declined = declined || length > bodyLimit_;
  }
  if (declined) {
    message_.headers.clear();
    head_ = {};
    switch (outcome) {
      case fast_head::Outcome::kNeedMore:
        return HeadRead::kNeedMore;
      case fast_head::Outcome::kOverLimit:
        return HeadRead::kOverLimit;
      default:
        return HeadRead::kBeast;
    }
  }
  if constexpr (isRequest) {
    methodText_.assign(head_.method);
    message_.target.assign(head_.target);
  } else {
    message_.status = head_.status;
  }
  // They point into the read buffer, which the caller consumes.
  head_.method = {};
  head_.target = {};
  if (length > 0) reserveBody(message_, length);
  remaining_ = length;
  state_ = length == 0 ? State::kDone : State::kBody;
  return HeadRead::kRead;
}

template <bool isRequest>
std::size_t MessageParser<isRequest>::toBeast(boost::asio::const_buffer buffer,
                                              boost::beast::error_code& ec) {
  state_ = State::kBeast;
  beast_.header_limit(headerLimit_);
  beast_.body_limit(bodyLimit_);
  beast_.eager(eager_);
  if (skip_) beast_.skip(true);
  return beast_.put(buffer, ec);
}

}  // namespace kshard::http::beast_detail
