// Internal to the Boost.Beast adapter (beast_message.h): a parser for the message heads that the
// data path sees nearly always, which hands every other head back to Beast's parser. Never
// include it from a public header.
//
// Why: Beast's parser was the largest single cost of a forwarded message in user space (about a
// sixth of each sidecar's instructions, for the request and for the answer), and its fields
// then went into Headers one append each. The heads kshard's data path carries are simple:
// HTTP/1.0 or 1.1, token field names, printable values, framed by one Content-Length or by
// nothing. This reads such a head in one pass and appends its fields to Headers as runs of the
// received text where they are already in Headers' wire form ("Name: value\r\n").
//
// It rejects only a head longer than the limit. What it does not read (any other version, a tab,
// obs-fold, obs-text, Transfer-Encoding, Upgrade, a Connection field with more than one option, a
// second Content-Length, ...) it declines, and Beast's parser reads the same bytes from the
// start, with its own checks and errors. (Beast applies its header limit to the start line and
// to the fields apart, and only when the head came in pieces; here it is the whole head's.) What it
// does read, it reads exactly as Beast would: fuzz/http_head_fuzz.cc checks this against Beast on
// every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "http/message.h"

namespace kshard::http::fast_head {

// What a head says about its message.
struct Head {
  std::size_t size = 0;     // bytes of the head, through the blank line
  unsigned version = 11;    // 10 or 11
  std::string_view method;  // requests: the method's text (a token of capital letters)
  std::string_view target;  // requests
  int status = 0;           // responses: 200..599
  std::optional<std::uint64_t> contentLength;
  bool connectionClose = false;      // Connection (or Proxy-Connection): close
  bool connectionKeepAlive = false;  // Connection (or Proxy-Connection): keep-alive
  bool expectContinue = false;       // Expect: 100-continue

  // As Beast's keep_alive() for a message framed without reading to the end of the stream.
  bool keepAlive() const { return version >= 11 ? !connectionClose : connectionKeepAlive; }
};

enum class Outcome {
  kParsed,     // `head` describes the message; its fields were appended to `fields`
  kNeedMore,   // the head is not all there yet, and what is there is shorter than the limit
  kDecline,    // not a simple head: Beast's parser must read it
  kOverLimit,  // the first `limit` bytes hold no whole head
};

// Reads the head at the start of `in` (the message's first byte first) into `head`, looking at no
// more than `limit` bytes. Unless kParsed, `fields` may hold some of the fields: clear it.
Outcome parseRequestHead(std::string_view in, std::size_t limit, Head& head, Headers& fields);
Outcome parseResponseHead(std::string_view in, std::size_t limit, Head& head, Headers& fields);

}  // namespace kshard::http::fast_head
