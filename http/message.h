// HTTP request and response values shared by kshard's server and client interfaces. No
// third-party type appears here: the adapters (cpprestsdk, Boost.Beast) convert at the edge.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kshard::http {

// TRACE is recognised (so that a router answers it 405 with Allow, as any method a path does not
// serve) but no kshard route serves it.
enum class Method { kGet, kHead, kPost, kPut, kPatch, kDelete, kOptions, kTrace };

std::string_view methodName(Method m);
std::optional<Method> parseMethod(std::string_view name);

// ASCII case-insensitive comparison, as for header names. Inline: header names are compared
// several times per message on the data path, and most comparisons end at the lengths.
inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  const auto lower = [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Content-Length and Transfer-Encoding: the adapters frame messages themselves and never copy
// these from a caller's or handler's headers.
inline bool isFramingHeader(std::string_view name) {
  return equalsIgnoreCase(name, "Content-Length") || equalsIgnoreCase(name, "Transfer-Encoding");
}

// Header fields in arrival order; names compare case-insensitively.
class Headers {
 public:
  using Entry = std::pair<std::string, std::string>;

  void add(std::string name, std::string value);
  // Replaces every field of that name.
  void set(std::string name, std::string value);
  void remove(std::string_view name);
  // Removes every field for which `pred(name)` holds.
  template <typename Pred>
  void removeIf(Pred pred) {
    std::erase_if(entries_, [&pred](const Entry& e) { return pred(std::string_view(e.first)); });
  }
  void reserve(std::size_t n) { entries_.reserve(n); }
  std::optional<std::string_view> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }

  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
};

struct Request {
  Method method = Method::kGet;
  // Path and query as sent on the wire: "/v1/entities/counter/a%2Fb?mode=tell".
  std::string target;
  Headers headers;
  std::string body;
  // Client side: a per-request timeout overriding the client's default; zero means the default.
  std::chrono::milliseconds timeout{0};

  // The target without the query (and fragment), still percent-encoded.
  std::string_view path() const;

  // Filled in by the server before the handler runs.
  std::map<std::string, std::string> query;  // decoded query parameters
  // Decoded captures of the route pattern, in path order; a pattern never names one twice.
  std::vector<std::pair<std::string, std::string>> params;
  std::string remoteAddress;  // "ip:port" of the peer

  // The capture named `name` (empty when the route has none of that name).
  std::string_view param(std::string_view name) const;
  std::optional<std::string_view> queryParam(std::string_view name) const;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;

  // A response with Content-Type: application/json.
  static Response json(int status, std::string body);
  // kshard's error shape: {"error": {"code": "<code>", "message": "<message>"}}.
  static Response error(int status, std::string_view code, std::string_view message);
};

// Percent-decodes a path segment or query component; false on a malformed escape. '+' is kept
// as '+' in paths and becomes a space only when `plusIsSpace` (query strings).
bool percentDecode(std::string_view in, std::string& out, bool plusIsSpace = false);
// Percent-encodes everything outside RFC 3986's unreserved set, so an entity id is one segment.
std::string percentEncode(std::string_view in);
// The same, appended to `out`.
void appendPercentEncoded(std::string& out, std::string_view in);

}  // namespace kshard::http
