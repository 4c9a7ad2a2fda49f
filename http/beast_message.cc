#include "http/beast_message.h"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace kshard::http::beast_detail {

namespace {

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

// Appends the fields of `headers` for which `skip(name)` is false. Headers keeps its fields in
// their wire form, so runs of kept fields are appended as they are, with one copy per run.
template <typename Skip>
void appendFields(std::string& out, const Headers& headers, Skip skip) {
  const std::string_view wire = headers.wire();
  std::size_t runStart = 0;
  std::size_t at = 0;
  for (const auto [name, value] : headers) {
    const std::size_t size = name.size() + value.size() + 4;
    if (skip(name)) {
      out.append(wire.substr(runStart, at - runStart));
      runStart = at + size;
    }
    at += size;
  }
  out.append(wire.substr(runStart, at - runStart));
}

}  // namespace

bool statusHasNoBody(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

bool asksToClose(const Headers& headers) {
  if (!headers.holdsAny(Headers::kConnection)) return false;
  for (const auto& [name, value] : headers) {
    if (equalsIgnoreCase(name, "Connection") && equalsIgnoreCase(value, "close")) return true;
  }
  return false;
}

std::string requestHead(const Request& request, std::string_view host, std::string_view userAgent) {
  const std::string_view method = methodName(request.method);
  const std::string_view target = request.target.empty() ? "/" : std::string_view(request.target);
  std::string out;
  out.reserve(method.size() + target.size() + request.headers.wire().size() + host.size() +
              userAgent.size() + 96);
  out.append(method);
  out.push_back(' ');
  out.append(target);
  out.append(" HTTP/1.1\r\n");
  const bool hasHost = request.headers.holdsAny(Headers::kHost);
  const bool hasUserAgent = request.headers.holdsAny(Headers::kUserAgent);
  if (request.headers.holdsAny(Headers::kFraming)) {
    appendFields(out, request.headers, isFramingHeader);
  } else {
    out.append(request.headers.wire());  // a message read or forwarded: no framing to drop
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
  std::string out;
  writeResponseHead(out, status, headers, bodySize, version, close);
  return out;
}

void writeResponseHead(std::string& out, int status, const Headers& headers, std::size_t bodySize,
                       unsigned version, bool close) {
  const auto code = static_cast<unsigned>(status);
  const auto reason = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(code));
  out.clear();
  out.reserve(headers.wire().size() + reason.size() + 96);
  out.append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  appendNumber(out, code);
  out.push_back(' ');
  out.append(reason.data(), reason.size());
  out.append("\r\n");
  if (headers.holdsAny(Headers::kFraming | Headers::kConnection)) {
    appendFields(out, headers, [](std::string_view name) {
      return isFramingHeader(name) || equalsIgnoreCase(name, "Connection");
    });
  } else {
    out.append(headers.wire());
  }
  if (!statusHasNoBody(status)) appendContentLength(out, bodySize);
  if (version == 10 && !close) out.append("Connection: keep-alive\r\n");
  if (version != 10 && close) out.append("Connection: close\r\n");
  out.append("\r\n");
}

}  // namespace kshard::http::beast_detail
