#include "http/beast_message.h"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace kshard::http::beast_detail {

namespace {

bool breaksFramingAt(char c, bool isName) {
  return c == '\r' || c == '\n' || c == '\0' || (isName && c == ':');
}

// CR, LF or NUL in `s`, or in a name a colon. Every field of every message written goes through
// here, so eight bytes at a time: a word with no byte below 14 (CR, LF and NUL are all below)
// and, for names, none equal to ':' is clean; a word that fails (a tab does) is checked byte by
// byte. A field of 8 bytes or more ends with a word that overlaps the one before.
bool breaksFraming(std::string_view s, bool isName) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  constexpr std::uint64_t kHighs = 0x8080808080808080ull;
  // Non-zero when some byte of `w` is below `n` (n <= 128): the classic "has less" test, exact.
  const auto hasLess = [](std::uint64_t w, std::uint64_t n) {
    return (w - kOnes * n) & ~w & kHighs;
  };
  const auto bytesBreak = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      if (breaksFramingAt(s[i], isName)) return true;
    }
    return false;
  };
  if (s.size() < 8) return bytesBreak(0, s.size());
  for (std::size_t i = 0;; i += 8) {
    const std::size_t at = std::min(i, s.size() - 8);
    std::uint64_t w;
    std::memcpy(&w, s.data() + at, sizeof w);
    const bool suspect = hasLess(w, 14) != 0 || (isName && hasLess(w ^ (kOnes * ':'), 1) != 0);
    if (suspect && bytesBreak(at, at + 8)) return true;
    if (at + 8 == s.size()) return false;
  }
}

// A field that would break the message's framing if copied as it is: CR, LF or NUL in its name or
// value (header injection), or an empty name. Parsed messages never have one; a handler's or a
// caller's headers might.
bool unsafeField(std::string_view name, std::string_view value) {
  return name.empty() || breaksFraming(name, true) || breaksFraming(value, false);
}

void appendNumber(std::string& out, std::uint64_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, end);
}

void appendField(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append(": ");
  out.append(value);
  out.append("\r\n");
}

void appendContentLength(std::string& out, std::size_t length) {
  out.append("Content-Length: ");
  appendNumber(out, length);
  out.append("\r\n");
}

std::size_t fieldsSize(const Headers& headers) {
  std::size_t n = 0;
  for (const auto& [name, value] : headers) n += name.size() + value.size() + 4;
  return n;
}

}  // namespace

bool statusHasNoBody(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

bool asksToClose(const Headers& headers) {
  for (const auto& [name, value] : headers) {
    if (equalsIgnoreCase(name, "Connection") && equalsIgnoreCase(value, "close")) return true;
  }
  return false;
}

std::string requestHead(const Request& request, std::string_view host, std::string_view userAgent) {
  const std::string_view method = methodName(request.method);
  const std::string_view target = request.target.empty() ? "/" : std::string_view(request.target);
  std::string out;
  out.reserve(method.size() + target.size() + fieldsSize(request.headers) + host.size() +
              userAgent.size() + 96);
  out.append(method);
  out.push_back(' ');
  out.append(target);
  out.append(" HTTP/1.1\r\n");
  bool hasHost = false;
  bool hasUserAgent = false;
  for (const auto& [name, value] : request.headers) {
    if (isFramingHeader(name) || unsafeField(name, value)) continue;
    hasHost = hasHost || equalsIgnoreCase(name, "Host");
    hasUserAgent = hasUserAgent || equalsIgnoreCase(name, "User-Agent");
    appendField(out, name, value);
  }
  if (!hasHost) appendField(out, "Host", host);
  if (!hasUserAgent && !userAgent.empty()) appendField(out, "User-Agent", userAgent);
  // As Beast's prepare_payload: a length whenever there is a body or the method expects one.
  const bool expectsBody = request.method == Method::kPost || request.method == Method::kPut ||
                           request.method == Method::kPatch || request.method == Method::kOptions;
  if (!request.body.empty() || expectsBody) appendContentLength(out, request.body.size());
  out.append("\r\n");
  return out;
}

std::string responseHead(int status, const Headers& headers, std::size_t bodySize, unsigned version,
                         bool close) {
  const auto code = static_cast<unsigned>(status);
  const auto reason = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(code));
  std::string out;
  out.reserve(fieldsSize(headers) + reason.size() + 96);
  out.append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  appendNumber(out, code);
  out.push_back(' ');
  out.append(reason.data(), reason.size());
  out.append("\r\n");
  for (const auto& [name, value] : headers) {
    if (isFramingHeader(name) || equalsIgnoreCase(name, "Connection") || unsafeField(name, value)) {
      continue;
    }
    appendField(out, name, value);
  }
  if (!statusHasNoBody(status)) appendContentLength(out, bodySize);
  if (version == 10 && !close) out.append("Connection: keep-alive\r\n");
  if (version != 10 && close) out.append("Connection: close\r\n");
  out.append("\r\n");
  return out;
}

}  // namespace kshard::http::beast_detail
