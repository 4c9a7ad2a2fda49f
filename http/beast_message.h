// Internal to the Boost.Beast adapter (beast_server.cc, beast_client.cc): reads and writes
// kshard's Request and Response directly, without Beast's message and field containers. Beast's
// parser still checks the syntax; only where the fields go changes. Never include it from a
// public header.
//
// Why: a forwarded message crossed three header containers per hop (Beast's parsed fields, kshard's
// Headers, Beast's fields to serialize), and Beast's serializer walks a view of a dozen buffers per
// message. Writing the head as one string and the body as a second buffer costs one allocation
// and one gather write.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "http/message.h"

namespace kshard::http::beast_detail {

// Fills a Request (isRequest) or a Response from Beast's parser callbacks.
template <bool isRequest>
class MessageParser final : public boost::beast::http::basic_parser<isRequest> {
 public:
  using Message = std::conditional_t<isRequest, Request, Response>;

  Message& get() { return message_; }
  // Valid once the header is done.
  unsigned version() const { return version_; }
  // Requests: the method, when kshard knows it, and its text as received.
  std::optional<Method> method() const { return method_; }
  const std::string& methodText() const { return methodText_; }
  // Requests: "Expect: 100-continue" was among the fields.
  bool expectsContinue() const { return expectContinue_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;
  using verb = boost::beast::http::verb;

  // Room for this many bytes of fields from the start.
  static constexpr std::size_t kFieldsReserved = 512;

  static std::string str(string_view s) { return {s.data(), s.size()}; }
  static std::string_view toStd(string_view s) { return {s.data(), s.size()}; }

  void on_request_impl(verb, string_view method, string_view target, int version,
                       error_code&) override {
    if constexpr (isRequest) {
      message_.headers.reserve(kFieldsReserved);
      methodText_ = str(method);
      method_ = parseMethod(methodText_);
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
    message_.headers.addParsed(toStd(nameText), toStd(value));
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    // Beast has checked a declared length against body_limit for requests only (Boost 1.74); the
    // reservation is capped either way.
    if (length)
      message_.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, 1u << 20)));
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

  Message message_;
  unsigned version_ = 11;
  std::optional<Method> method_;
  std::string methodText_;
  bool expectContinue_ = false;
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

// True when a response of this status carries no body (1xx, 204, 304).
bool statusHasNoBody(int status);

// True when the handler's headers ask to close the connection ("Connection: close").
bool asksToClose(const Headers& headers);

}  // namespace kshard::http::beast_detail
