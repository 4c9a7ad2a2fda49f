#include "http/internal/beast_message.h"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace kshard::http::beast_detail {

namespace {

// Writes a head into room sized beforehand: one size check and one fill for the whole head, not
// a capacity check and a call per piece. `most` must cover everything written.
class HeadWriter {
 public:
  HeadWriter(std::string& out, std::size_t most) : out_(out) {
    const std::size_t start = out.size();
    out.resize(start + most);
    at_ = out.data() + start;
    end_ = at_ + most;
  }
  HeadWriter& operator<<(std::string_view piece) {
    assert(piece.size() <= static_cast<std::size_t>(end_ - at_) && "a head outgrew its room");
    if (!piece.empty()) std::memcpy(at_, piece.data(), piece.size());
    at_ += piece.size();
    return *this;
  }
  HeadWriter& number(std::uint64_t n) {
    at_ = std::to_chars(at_, end_, n).ptr;
    return *this;
  }
  // Keeps what was written, and drops the rest of the room.
  void finish() { out_.resize(static_cast<std::size_t>(at_ - out_.data())); }

 private:
  std::string& out_;
  char* at_;
  char* end_;
};

void writeContentLength(HeadWriter& out, std::uint64_t length) {
  out << "Content-Length: ";
  out.number(length) << "\r\n";
}

// What a head holds besides its request line or status reason, fields, host and user agent: the
// separators, "Host: ", "User-Agent: ", "Content-Length: " with 20 digits, "Connection: ...",
// the status code and the blank line (86 bytes at most).
constexpr std::size_t kHeadExtra = 96;

// Writes the fields of `headers` for which `skip(name)` is false. Headers keeps its fields in
// their wire form, so runs of kept fields are written as they are, with one copy per run.
template <typename Skip>
void writeFields(HeadWriter& out, const Headers& headers, Skip skip) {
  const std::string_view wire = headers.wire();
  std::size_t runStart = 0;
  std::size_t at = 0;
  for (const auto [name, value] : headers) {
    const std::size_t size = name.size() + value.size() + 4;
    if (skip(name)) {
      out << wire.substr(runStart, at - runStart);
      runStart = at + size;
    }
    at += size;
  }
  out << wire.substr(runStart, at - runStart);
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
  std::string head;
  HeadWriter out(head, method.size() + target.size() + request.headers.wire().size() + host.size() +
                           userAgent.size() + kHeadExtra);
  out << method << " " << target << " HTTP/1.1\r\n";
  if (request.headers.holdsAny(Headers::kFraming)) {
    writeFields(out, request.headers, isFramingHeader);
  } else {
    out << request.headers.wire();  // a message read or forwarded: no framing to drop
  }
  if (!request.headers.holdsAny(Headers::kHost)) out << "Host: " << host << "\r\n";
  if (!request.headers.holdsAny(Headers::kUserAgent) && !userAgent.empty()) {
    out << "User-Agent: " << userAgent << "\r\n";
  }
  // As Beast's prepare_payload: a length whenever there is a body or the method expects one.
  const bool expectsBody = request.method == Method::kPost || request.method == Method::kPut ||
                           request.method == Method::kPatch || request.method == Method::kOptions;
  const std::size_t bodySize = request.payload().size();
  if (bodySize != 0 || expectsBody) writeContentLength(out, bodySize);
  out << "\r\n";
  out.finish();
  return head;
}

std::string responseHead(int status, const Headers& headers, std::size_t bodySize, unsigned version,
                         bool close) {
  std::string out;
  writeResponseHead(out, status, headers, bodySize, version, close);
  return out;
}

void writeResponseHead(std::string& head, int status, const Headers& headers, std::size_t bodySize,
                       unsigned version, bool close) {
  const auto code = static_cast<unsigned>(status);
  const auto reason = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(code));
  head.clear();
  HeadWriter out(head, headers.wire().size() + reason.size() + kHeadExtra);
  out << (version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  out.number(code) << " " << std::string_view(reason.data(), reason.size()) << "\r\n";
  if (headers.holdsAny(Headers::kFraming | Headers::kConnection)) {
    writeFields(out, headers, [](std::string_view name) {
      return isFramingHeader(name) || equalsIgnoreCase(name, "Connection");
    });
  } else {
    out << headers.wire();
  }
  if (!statusHasNoBody(status)) writeContentLength(out, bodySize);
  if (version == 10 && !close) out << "Connection: keep-alive\r\n";
  if (version != 10 && close) out << "Connection: close\r\n";
  out << "\r\n";
  out.finish();
}

}  // namespace kshard::http::beast_detail
