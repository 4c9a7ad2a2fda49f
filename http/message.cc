#include "http/message.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/enum_names.h"

namespace kshard::http {

namespace {

constexpr std::array<std::pair<Method, std::string_view>, 8> kMethodNames = {{
    {Method::kGet, "GET"},
    {Method::kHead, "HEAD"},
    {Method::kPost, "POST"},
    {Method::kPut, "PUT"},
    {Method::kPatch, "PATCH"},
    {Method::kDelete, "DELETE"},
    {Method::kOptions, "OPTIONS"},
    {Method::kTrace, "TRACE"},
}};

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986's unreserved bytes, which percent-encoding leaves as they are.
constexpr std::array<bool, 256> kUnreserved = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[static_cast<std::size_t>(c)] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                     (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                     c == '~';
  }
  return t;
}();

bool breaksFramingAt(char c, bool isName) {
  return c == '\r' || c == '\n' || c == '\0' || (isName && c == ':');
}

// CR, LF or NUL in `s`, or in a name a colon. Every field added to a Headers goes through here,
// so eight bytes at a time: a word with no byte below 14 (CR, LF and NUL are all below) and, for
// names, none equal to ':' is clean; a word that fails (a tab does) is checked byte by byte. A
// field of 8 bytes or more ends with a word that overlaps the one before.
bool breaksFraming(std::string_view s, bool isName) {
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
    const bool suspect = detail::bytesBelow(w, 14) != 0 ||
                         (isName && detail::bytesBelow(w ^ (detail::kOnes * ':'), 1) != 0);
    if (suspect && bytesBreak(at, at + 8)) return true;
    if (at + 8 == s.size()) return false;
  }
}

}  // namespace

std::string_view methodName(Method m) { return nameIn(kMethodNames, m, "GET"); }

// Method names are case-sensitive (RFC 9110, 9.1).
std::optional<Method> parseMethod(std::string_view name) { return valueIn(kMethodNames, name); }

bool listHolds(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const std::size_t comma = std::min(list.find(','), list.size());
    std::string_view one = list.substr(0, comma);
    while (!one.empty() && (one.front() == ' ' || one.front() == '\t')) one.remove_prefix(1);
    while (!one.empty() && (one.back() == ' ' || one.back() == '\t')) one.remove_suffix(1);
    if (equalsIgnoreCase(one, token)) return true;
    list.remove_prefix(std::min(comma + 1, list.size()));
  }
  return false;
}

bool isWritableField(std::string_view name, std::string_view value) {
  return !name.empty() && !breaksFraming(name, true) && !breaksFraming(value, false);
}

bool Headers::pointsInto(std::string_view v) const {
  const std::less<const char*> before;
  return !before(v.data(), text_.data()) && before(v.data(), text_.data() + text_.size());
}

void Headers::appendLine(std::string_view name, std::string_view value) {
  // One resize and two copies, where four appends each checked the capacity and copied.
  const std::size_t at = text_.size();
  text_.resize(at + name.size() + value.size() + 4);
  char* p = text_.data() + at;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  if (!value.empty()) std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
  ++count_;
  known_ |= knownBit(name);
}

void Headers::add(std::string_view name, std::string_view value) {
  if (!isWritableField(name, value)) return;
  if (pointsInto(name) || pointsInto(value)) {
    // Copied first: the append may move the text they point into.
    appendLine(std::string(name), std::string(value));
    return;
  }
  appendLine(name, value);
}

void Headers::addParsed(std::string_view name, std::string_view value) {
  assert(isWritableField(name, value) && !pointsInto(name) && !pointsInto(value));
  appendLine(name, value);
}

void Headers::appendWire(std::string_view lines, std::size_t count, std::uint8_t known) {
  assert(!pointsInto(lines));
  text_.append(lines);
  count_ += count;
  known_ |= known;
}

void Headers::set(std::string_view name, std::string_view value) {
  if (pointsInto(name) || pointsInto(value)) {
    // Copied first: remove() moves the text they point into.
    set(std::string(name), std::string(value));
    return;
  }
  remove(name);
  add(name, value);
}

void Headers::remove(std::string_view name) {
  // Copied first when it points into the text that removing moves.
  if (pointsInto(name)) return remove(std::string(name));
  // Mostly there is nothing to remove (set() of a field the message does not carry): get()'s scan
  // looks only at names of that length, where removeIf would take every line apart.
  if (!has(name)) return;
  removeIf([name](std::string_view n) { return equalsIgnoreCase(n, name); });
}

std::optional<std::string_view> Headers::get(std::string_view name) const {
  // No field has an empty name or a colon in it.
  if (name.empty() || name.find(':') != std::string_view::npos) return std::nullopt;
  const char* at = text_.data();
  const char* const end = at + text_.size();
  while (at != end) {
    // A line whose name has the length asked for has its colon right after it; a line without
    // one there is skipped with one scan, to its LF, not two.
    const auto left = static_cast<std::size_t>(end - at);
    if (left > name.size() && at[name.size()] == ':' &&
        equalsIgnoreCase(std::string_view(at, name.size()), name)) {
      const char* value = at + name.size() + 2;
      return std::string_view(
          value, static_cast<std::size_t>(detail::findKnownByte(value, end, '\r') - value));
    }
    at = detail::findKnownByte(at, end, '\n') + 1;
  }
  return std::nullopt;
}

std::string_view Request::path() const {
  // As the router reads a target: the fragment, then the query, are not part of the path.
  const std::string_view t = target;
  return t.substr(0, t.find_first_of("?#"));
}

std::string_view Request::param(std::string_view name) const {
  for (const auto& [key, value] : params) {
    if (key == name) return value;
  }
  return {};
}

std::optional<std::string_view> Request::queryParam(std::string_view name) const {
  const auto it = query.find(std::string(name));
  if (it == query.end()) return std::nullopt;
  return std::string_view(it->second);
}

Response Response::json(int status, std::string body) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

Response Response::json(int status, std::shared_ptr<const std::string> body) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", "application/json");
  r.sharedBody = std::move(body);
  return r;
}

Response Response::error(int status, std::string_view code, std::string_view message) {
  // nlohmann_json escapes quotes, control characters and invalid UTF-8 is replaced rather than
  // thrown on, so any message (an entity id, a peer's error text) yields valid JSON.
  const nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
  return json(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

bool percentDecode(std::string_view in, std::string& out, bool plusIsSpace) {
  out.clear();
  out.reserve(in.size());
  // Runs of bytes that stand for themselves are copied whole: an entity id is usually one run.
  std::size_t i = 0;
  for (;;) {
    std::size_t j = i;
    if (plusIsSpace) {
      while (j < in.size() && in[j] != '%' && in[j] != '+') ++j;
    } else {
      // (No memchr on nothing: an empty view's data may be null.)
      const void* pct = i < in.size() ? std::memchr(in.data() + i, '%', in.size() - i) : nullptr;
      j = pct == nullptr ? in.size()
                         : static_cast<std::size_t>(static_cast<const char*>(pct) - in.data());
    }
    out.append(in.data() + i, j - i);
    if (j == in.size()) return true;
    if (in[j] == '+') {
      out.push_back(' ');
      i = j + 1;
      continue;
    }
    if (j + 2 >= in.size()) return false;
    const int hi = hexValue(in[j + 1]);
    const int lo = hexValue(in[j + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i = j + 3;
  }
}

std::string percentEncode(std::string_view in) {
  std::string out;
  appendPercentEncoded(out, in);
  return out;
}

void appendPercentEncoded(std::string& out, std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out.reserve(out.size() + in.size());
  // Runs of unreserved bytes are copied whole: an entity id is usually one run.
  std::size_t i = 0;
  while (i < in.size()) {
    std::size_t j = i;
    while (j < in.size() && kUnreserved[static_cast<unsigned char>(in[j])]) ++j;
    out.append(in.data() + i, j - i);
    if (j == in.size()) break;
    const auto c = static_cast<unsigned char>(in[j]);
    const char escape[3] = {'%', kHex[c >> 4], kHex[c & 0x0F]};
    out.append(escape, 3);
    i = j + 1;
  }
}

}  // namespace kshard::http
