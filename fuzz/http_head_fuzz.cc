// The data path's HTTP message reader (http/internal/beast_message.h, MessageParser) and its fast
// head parser (http/internal/fast_head.h), against Boost.Beast's parser alone, on the same bytes.
//
// fast_head may decline any head, but what it reads it must read as Beast does. Checks:
//   - a head fast_head reads is one Beast reads too, to the same byte, with the same method,
//     target, status, version, fields (names, values, order), Content-Length, keep-alive and
//     Expect: 100-continue, and a head it reads is never over the limit;
//   - a head it waits for more bytes of is one Beast has not finished either, and under the limit;
//     one it finds over the limit is: the first `limit` bytes hold no blank line;
//   - MessageParser, fed the bytes in two pieces (cut where the input says), ends as Beast's
//     parser fed the same pieces: the same error or none, the same message, body and framing.
//     For a head over the limit the errors may differ (see run()).
//
// Input: the message kind (request or response), the header and body limits, whether a response
// answers HEAD, where to cut, then the message bytes.
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "http/internal/beast_message.h"
#include "http/internal/fast_head.h"

namespace kshard::fuzz {
namespace {

using http::Headers;
using http::beast_detail::BeastParser;
using http::beast_detail::MessageParser;

std::string fieldsText(const Headers& headers) {
  std::string out;
  for (const auto& [name, value] : headers) {
    out.append(name).append("=").append(value).append("|");
  }
  return out;
}

struct Settings {
  std::uint32_t headerLimit;
  std::uint64_t bodyLimit;
  bool skip;
};

// What a parser made of the bytes, in a form two parsers' results compare in.
struct Outcome {
  std::string error;
  bool headerDone = false;
  bool done = false;
  std::string summary;

  bool operator==(const Outcome&) const = default;
};

// True when the first `limit` bytes hold no whole head.
bool overLimit(std::string_view bytes, std::size_t limit) {
  return bytes.substr(0, limit).find("\r\n\r\n") == std::string_view::npos && bytes.size() >= limit;
}

// Feeds `pieces` one after the other as a connection's read buffer would hold them, the way
// http/internal/beast_stream.h's ReadUntil does, then the end of the stream when the message is not
// done.
template <typename Parser>
void feed(Parser& parser, const std::vector<std::string_view>& pieces, Outcome& out) {
  std::string buffer;
  std::size_t at = 0;
  boost::beast::error_code ec;
  for (const std::string_view piece : pieces) {
    buffer.append(piece);
    while (!parser.is_done() && at < buffer.size()) {
      const std::size_t used =
          parser.put(boost::asio::buffer(buffer.data() + at, buffer.size() - at), ec);
      at += used;
      if (ec == boost::beast::http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) break;
    }
    if (ec) break;
  }
  if (!ec && !parser.is_done() && parser.got_some()) parser.put_eof(ec);
  out.error = ec ? ec.message() : "";
  out.headerDone = parser.is_header_done();
  out.done = parser.is_done();
  out.summary += "consumed=" + std::to_string(at) + ";";
}

// Runs `parser` (MessageParser or Beast's, filling `m`) over the pieces.
template <bool isRequest, typename Parser, typename Message>
Outcome runParser(Parser& parser, const Message& m, const Settings& s,
                  const std::vector<std::string_view>& pieces) {
  parser.header_limit(s.headerLimit);
  parser.body_limit(s.bodyLimit);
  parser.eager(true);
  if (s.skip) parser.skip(true);
  Outcome out;
  feed(parser, pieces, out);
  if (out.error.empty() && out.headerDone) {
    if constexpr (isRequest) {
      out.summary += "method=" + std::string(parser.methodText()) + ";target=" + m.target;
      out.summary += ";expect=" + std::to_string(parser.expectsContinue());
    } else {
      out.summary += "status=" + std::to_string(m.status);
    }
    out.summary += ";version=" + std::to_string(parser.version()) +
                   ";fields=" + fieldsText(m.headers) + ";body=" + m.body;
    const auto length = parser.content_length();
    out.summary += ";length=" + (length ? std::to_string(*length) : std::string("none"));
    out.summary += ";keepAlive=" + std::to_string(parser.keep_alive()) +
                   ";needEof=" + std::to_string(parser.need_eof());
  }
  return out;
}

template <bool isRequest>
Outcome runMessageParser(const Settings& s, const std::vector<std::string_view>& pieces) {
  MessageParser<isRequest> parser;
  return runParser<isRequest>(parser, parser.get(), s, pieces);
}

template <bool isRequest>
Outcome runBeast(const Settings& s, const std::vector<std::string_view>& pieces) {
  typename BeastParser<isRequest>::Message m;
  BeastParser<isRequest> parser(m);
  return runParser<isRequest>(parser, m, s, pieces);
}

// fast_head alone on the whole input, against Beast reading only the header.
template <bool isRequest>
void checkHead(std::string_view bytes, std::uint32_t limit) {
  http::fast_head::Head head;
  Headers fields;
  const auto outcome = isRequest ? http::fast_head::parseRequestHead(bytes, limit, head, fields)
                                 : http::fast_head::parseResponseHead(bytes, limit, head, fields);
  if (outcome == http::fast_head::Outcome::kDecline) return;
  if (outcome == http::fast_head::Outcome::kOverLimit) {
    check(overLimit(bytes, limit), "a head over the limit is one", std::string(bytes));
    return;
  }

  typename BeastParser<isRequest>::Message m;
  BeastParser<isRequest> beast(m);
  beast.header_limit(limit);
  // Not boost::none: Boost 1.74 compares a length with an empty optional as over the limit.
  beast.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast.eager(false);
  boost::beast::error_code ec;
  const std::size_t used = beast.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  const std::string detail = std::string(bytes) + " (Beast: " + ec.message() + ")";

  if (outcome == http::fast_head::Outcome::kNeedMore) {
    check(bytes.size() < limit, "fast_head waits only under the limit", detail);
    check(!beast.is_header_done(), "fast_head waits only where Beast has not finished", detail);
    return;
  }
  check(head.size <= limit, "a head fast_head reads is within the limit", detail);
  check(!ec && beast.is_header_done(), "Beast reads every head fast_head reads", detail);
  check(used == head.size, "both end the head at the same byte", detail);
  if constexpr (isRequest) {
    check(head.method == beast.methodText() && head.target == m.target,
          "the same method and target", detail);
    check(head.expectContinue == beast.expectsContinue(), "the same Expect", detail);
  } else {
    check(head.status == m.status, "the same status", detail);
  }
  check(head.version == beast.version(), "the same version", detail);
  check(fieldsText(fields) == fieldsText(m.headers), "the same fields, in order",
        detail + " fast: " + fieldsText(fields) + " Beast: " + fieldsText(m.headers));
  check(fields.wire() == m.headers.wire(), "the same wire form of the fields", detail);
  const auto length = beast.content_length();
  check(head.contentLength.has_value() == length.has_value() &&
            (!length || *head.contentLength == *length),
        "the same Content-Length", detail);
  if (!beast.need_eof()) {
    check(head.keepAlive() == beast.keep_alive(), "the same keep-alive", detail);
  }
}

template <bool isRequest>
void run(FuzzInput& in) {
  Settings s{};
  s.headerLimit = static_cast<std::uint32_t>(in.inRange(1, 512));
  s.bodyLimit = static_cast<std::uint64_t>(in.inRange(0, 64));
  s.skip = !isRequest && in.flag();
  const auto cut = static_cast<std::size_t>(in.inRange(0, 1024));
  const std::string_view bytes = in.rest();
  checkHead<isRequest>(bytes, s.headerLimit);

  std::vector<std::string_view> pieces;
  const std::size_t at = std::min(cut, bytes.size());
  pieces.push_back(bytes.substr(0, at));
  pieces.push_back(bytes.substr(at));
  const Outcome ours = runMessageParser<isRequest>(s, pieces);
  const Outcome beasts = runBeast<isRequest>(s, pieces);
  // Beast applies its header limit to the start line and the fields apart, and only to a head
  // that came in pieces (with the whole head in one buffer it checks neither); MessageParser's
  // fast path to the whole head, and its fallback hands Beast all it has at once. So for a head
  // over the limit, which errors come out depends on how the bytes came: only a message both
  // read must be the same.
  if (overLimit(bytes, s.headerLimit) && !(ours.error.empty() && beasts.error.empty())) return;
  check(ours == beasts, "MessageParser ends as Beast's parser does",
        std::string(bytes) + "\n ours:  " + ours.error + " " + ours.summary +
            "\n Beast: " + beasts.error + " " + beasts.summary);
}

}  // namespace

int fuzzOneHttpHead(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  if (in.flag()) {
    run<true>(in);
  } else {
    run<false>(in);
  }
  return 0;
}

}  // namespace kshard::fuzz
