// HTTP request and response values shared by kshard's server and client interfaces. No
// third-party type appears here: the adapters (cpprestsdk, Boost.Beast) convert at the edge.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kshard::http {

// TRACE is recognised (so that a router answers it 405 with Allow, as any method a path does not
// serve) but no kshard route serves it.
enum class Method { kGet, kHead, kPost, kPut, kPatch, kDelete, kOptions, kTrace };

std::string_view methodName(Method m);
std::optional<Method> parseMethod(std::string_view name);

namespace detail {

// Word-at-a-time byte tests, eight bytes of a little-endian word at once.
inline constexpr std::uint64_t kOnes = 0x0101010101010101ull;
inline constexpr std::uint64_t kHighs = 0x8080808080808080ull;

// Non-zero when some byte of `w` is below `n` (n <= 128). The lowest byte flagged is the first
// such byte exactly; only bytes above it can be flagged wrongly, by the borrow.
constexpr std::uint64_t bytesBelow(std::uint64_t w, std::uint64_t n) {
  return (w - kOnes * n) & ~w & kHighs;
}

// `w` with each ASCII capital ('A' to 'Z') made small; every other byte as it was.
constexpr std::uint64_t foldCase(std::uint64_t w) {
  // Seven bits of each byte, so that the sums stay within their byte.
  const std::uint64_t low = w & ~kHighs;
  const std::uint64_t fromA = low + kOnes * (0x80 - 'A');      // top bit: at least 'A'
  const std::uint64_t pastZ = low + kOnes * (0x80 - 'Z' - 1);  // top bit: above 'Z'
  const std::uint64_t capitals = fromA & ~pastZ & ~w & kHighs;
  return w | (capitals >> 2);  // bit 7 of a byte to bit 5 of the same byte: 'A' + 0x20 = 'a'
}

template <typename Word>
Word loadWord(const char* at) {
  Word w;
  std::memcpy(&w, at, sizeof w);
  return w;
}

}  // namespace detail

// ASCII case-insensitive comparison, as for header names. Inline: header names are compared
// several times per message on the data path, and most comparisons end at the lengths. A word at
// a time: the first and last words of a name shorter than a word overlap, as do the last two of
// a longer one.
inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  const auto same = [](std::uint64_t x, std::uint64_t y) {
    return x == y || detail::foldCase(x) == detail::foldCase(y);
  };
  if (n >= 8) {
    for (std::size_t i = 0;; i += 8) {
      if (i > n - 8) i = n - 8;
      if (!same(detail::loadWord<std::uint64_t>(a.data() + i),
                detail::loadWord<std::uint64_t>(b.data() + i))) {
        return false;
      }
      if (i == n - 8) return true;
    }
  }
  if (n >= 4) {
    const auto halves = [n](const char* at) {
      return detail::loadWord<std::uint32_t>(at) |
             (std::uint64_t{detail::loadWord<std::uint32_t>(at + n - 4)} << 32);
    };
    return same(halves(a.data()), halves(b.data()));
  }
  const auto lower = [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// True when the comma-separated field value `list` (Connection, Upgrade) holds `token`, compared
// case-insensitively, spaces and tabs around each element ignored.
bool listHolds(std::string_view list, std::string_view token);

// Content-Length and Transfer-Encoding: the adapters frame messages themselves and never copy
// these from a caller's or handler's headers.
inline bool isFramingHeader(std::string_view name);

// A header field that can be written as it is: a non-empty name without CR, LF, NUL or colon,
// and a value without CR, LF or NUL. Anything else would break a message's framing (header
// injection); Headers never holds such a field.
bool isWritableField(std::string_view name, std::string_view value);

// Header fields in arrival order; names compare case-insensitively.
//
// Kept as the fields' wire form, one "Name: value\r\n" line each, in one string: a message's
// fields cost one allocation, however many there are, a copy is one copy, and writing them is
// appending that text (see wire()). A proxy moves every message's fields through several of
// these per hop, so this is on the data path.
class Headers {
 public:
  using Entry = std::pair<std::string_view, std::string_view>;

 private:
  // The line at `at` (of text ending at `end`): its name and value, and where the next starts.
  struct Line {
    std::string_view name;
    std::string_view value;
    const char* next = nullptr;
  };
  static Line lineAt(const char* at, const char* end);

 public:
  // Walks the lines; an Entry's views point into the Headers and last until it changes.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Entry;

    const_iterator() = default;
    Entry operator*() const { return {line_.name, line_.value}; }
    const_iterator& operator++() {
      at_ = line_.next;
      if (at_ != end_) line_ = lineAt(at_, end_);
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const const_iterator& other) const { return at_ == other.at_; }

   private:
    friend class Headers;
    const_iterator(const char* at, const char* end) : at_(at), end_(end) {
      if (at_ != end_) line_ = lineAt(at_, end_);
    }
    const char* at_ = nullptr;
    const char* end_ = nullptr;
    Line line_;
  };

  // A few fields that the adapters look for in every message they write, as bits: whether the
  // Headers holds such a field is known without reading its lines.
  enum Known : std::uint8_t {
    kHost = 1,
    kUserAgent = 2,
    kConnection = 4,
    kContentLength = 8,
    kTransferEncoding = 16,
  };
  static constexpr std::uint8_t kFraming = kContentLength | kTransferEncoding;
  // The Known bit of a field name, or 0.
  static std::uint8_t knownBit(std::string_view name);

  Headers() = default;
  Headers(const Headers&) = default;
  Headers& operator=(const Headers&) = default;
  // A moved-from Headers is empty.
  Headers(Headers&& other) noexcept
      : text_(std::move(other.text_)),
        count_(std::exchange(other.count_, 0)),
        known_(std::exchange(other.known_, 0)) {
    other.text_.clear();
  }
  Headers& operator=(Headers&& other) noexcept {
    if (this == &other) return *this;
    text_ = std::move(other.text_);
    count_ = std::exchange(other.count_, 0);
    known_ = std::exchange(other.known_, 0);
    other.text_.clear();
    return *this;
  }

  // Appends a field. One that is not writable (isWritableField) is dropped: no message could
  // carry it.
  void add(std::string_view name, std::string_view value);
  // add() for a field the caller knows is writable: a parser's that refuses everything
  // isWritableField does (a name of token characters, a value without control characters but
  // tab), or one kshard makes from a constant name and a value it formatted. No second check.
  void addParsed(std::string_view name, std::string_view value);
  // Replaces every field of that name.
  void set(std::string_view name, std::string_view value);
  void remove(std::string_view name);
  // Appends `count` fields that a parser found already in wire form: each line exactly
  // "Name: value\r\n" and writable (isWritableField), `known` the Known bits of their names. A
  // parser copies runs of such lines in one go.
  void appendWire(std::string_view lines, std::size_t count, std::uint8_t known);
  void clear() {
    text_.clear();
    count_ = 0;
    known_ = 0;
  }
  // Removes every field for which `pred(name)` (or `pred(name, value)`) holds. The views given
  // to pred last only for that call: the text moves as fields are removed.
  template <typename Pred>
  void removeIf(Pred pred);
  // Room for this many bytes of fields (a line is name + value + 4).
  void reserve(std::size_t bytes) { text_.reserve(bytes); }
  std::optional<std::string_view> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }

  const_iterator begin() const { return {text_.data(), text_.data() + text_.size()}; }
  const_iterator end() const { return {text_.data() + text_.size(), text_.data() + text_.size()}; }
  // True when some field has one of the `known` names (Known bits).
  bool holdsAny(std::uint8_t known) const { return (known_ & known) != 0; }
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The fields as they go on the wire: "Name: value\r\n" for each, in order.
  std::string_view wire() const { return text_; }

 private:
  // Appends "name: value\r\n"; neither may point into text_.
  void appendLine(std::string_view name, std::string_view value);
  // True when `v` points into text_ (a view from get() or an iterator).
  bool pointsInto(std::string_view v) const;

  std::string text_;
  std::size_t count_ = 0;
  std::uint8_t known_ = 0;  // Known bits of the fields' names
};

namespace detail {

// The first `c` at or after `at`, which the caller knows is before `end`. Eight bytes at a time:
// the fields' names and values are mostly short, where a call to memchr costs more than the scan.
inline const char* findKnownByte(const char* at, const char* end, char c) {
  static_assert(std::endian::native == std::endian::little, "the first match is the lowest byte");
  const std::uint64_t pattern = kOnes * static_cast<unsigned char>(c);
  while (end - at >= 8) {
    std::uint64_t w;
    std::memcpy(&w, at, sizeof w);
    // The bytes equal to c are the zero bytes of w ^ pattern.
    const std::uint64_t zero = bytesBelow(w ^ pattern, 1);
    if (zero != 0) return at + (std::countr_zero(zero) >> 3);
    at += 8;
  }
  while (*at != c) ++at;
  return at;
}

}  // namespace detail

inline Headers::Line Headers::lineAt(const char* at, const char* end) {
  // Every line is "name: value\r\n", a name holds no colon and a value no CR (add() made sure).
  const char* colon = detail::findKnownByte(at, end, ':');
  const char* value = colon + 2;
  const char* cr = detail::findKnownByte(value, end, '\r');
  return {std::string_view(at, static_cast<std::size_t>(colon - at)),
          std::string_view(value, static_cast<std::size_t>(cr - value)), cr + 2};
}

inline std::uint8_t Headers::knownBit(std::string_view name) {
  switch (name.size()) {
    case 4:
      return equalsIgnoreCase(name, "host") ? kHost : 0;
    case 10:
      if (equalsIgnoreCase(name, "user-agent")) return kUserAgent;
      return equalsIgnoreCase(name, "connection") ? kConnection : 0;
    case 14:
      return equalsIgnoreCase(name, "content-length") ? kContentLength : 0;
    case 17:
      return equalsIgnoreCase(name, "transfer-encoding") ? kTransferEncoding : 0;
    default:
      return 0;
  }
}

inline bool isFramingHeader(std::string_view name) {
  return (Headers::knownBit(name) & Headers::kFraming) != 0;
}

template <typename Pred>
void Headers::removeIf(Pred pred) {
  // Compacts in place: kept lines move down over removed ones, in one pass.
  char* const base = text_.data();
  const char* const end = base + text_.size();
  std::size_t kept = 0;
  std::size_t count = 0;
  std::uint8_t known = 0;
  for (const char* at = base; at != end;) {
    const Line line = lineAt(at, end);
    const auto size = static_cast<std::size_t>(line.next - at);
    bool remove;
    if constexpr (std::is_invocable_v<Pred&, std::string_view, std::string_view>) {
      remove = pred(line.name, line.value);
    } else {
      remove = pred(line.name);
    }
    if (!remove) {
      if (known_ != 0) known |= knownBit(line.name);
      if (base + kept != at) std::memmove(base + kept, at, size);
      kept += size;
      ++count;
    }
    at = line.next;
  }
  text_.resize(kept);
  count_ = count;
  known_ = known;
}

// A message the Beast adapter (the data path) reads carries no framing fields (Content-Length,
// Transfer-Encoding) in its headers: its body is whole, and every adapter writes its own framing.
struct Request {
  Method method = Method::kGet;
  // Path and query as sent on the wire: "/v1/entities/counter/a%2Fb?mode=tell".
  std::string target;
  Headers headers;
  std::string body;
  // Client side: a per-request timeout overriding the client's default; zero means the default.
  std::chrono::milliseconds timeout{0};
  // Client side: a body the caller keeps (to send it again on a retry), sent instead of `body`
  // without a copy. The client holds the reference until the request's callback has run.
  std::shared_ptr<const std::string> sharedBody;

  // The body a client sends: *sharedBody when set, else body.
  std::string_view payload() const { return sharedBody ? std::string_view(*sharedBody) : body; }

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
  // Instead of `body` (which is then empty): a body many answers share, written without a copy
  // (one map's changes sent to a thousand sidecars at once).
  std::shared_ptr<const std::string> sharedBody = nullptr;

  // The body a server sends: *sharedBody when set, else body.
  std::string_view payload() const { return sharedBody ? std::string_view(*sharedBody) : body; }

  // A response with Content-Type: application/json.
  static Response json(int status, std::string body);
  static Response json(int status, std::shared_ptr<const std::string> body);
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
