#include "http/internal/fast_head.h"

#include <array>
#include <bit>
#include <cstring>

namespace kshard::http::fast_head {

namespace {

// RFC 9110's tchar: the bytes of a field name.
constexpr std::array<bool, 256> kTokenChars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (const char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

// The first byte at or after `at` outside printable ASCII (0x20..0x7E): a control byte (the CR
// that ends a line, a tab), DEL or obs-text; `end` when there is none. Eight bytes at a time:
// below the first such byte no subtraction borrows and no addition carries, so the lowest byte
// flagged is that byte exactly.
const char* findUnprintable(const char* at, const char* end) {
  using detail::kHighs;
  using detail::kOnes;
  while (end - at >= 8) {
    std::uint64_t w;
    std::memcpy(&w, at, sizeof w);
    const std::uint64_t flags = ((w - kOnes * 0x20) | w | (w + kOnes)) & kHighs;
    if (flags != 0) return at + (std::countr_zero(flags) >> 3);
    at += 8;
  }
  for (; at != end; ++at) {
    const auto c = static_cast<unsigned char>(*at);
    if (c < 0x20 || c >= 0x7F) return at;
  }
  return end;
}

// A field name (token characters only) against a name in lower case (letters and '-'),
// ignoring case, a word at a time. Setting bit 0x20 maps 'A'..'Z' to 'a'..'z' and leaves 'a'..'z'
// and '-' as they are, and no other token character becomes a lower-case letter or '-' that way
// (only CR would become '-'), so the comparison is exact. `name` and `lower` have the same size,
// of at least 4.
bool tokenIs(std::string_view name, std::string_view lower) {
  const std::size_t n = lower.size();
  if (n >= 8) {
    for (std::size_t at = 0;; at += 8) {
      const std::size_t i = std::min(at, n - 8);  // the last word overlaps the one before
      std::uint64_t a;
      std::uint64_t b;
      std::memcpy(&a, name.data() + i, 8);
      std::memcpy(&b, lower.data() + i, 8);
      if ((a | (detail::kOnes * 0x20)) != b) return false;
      if (i + 8 == n) return true;
    }
  }
  std::uint32_t a0;
  std::uint32_t a1;
  std::uint32_t b0;
  std::uint32_t b1;
  std::memcpy(&a0, name.data(), 4);
  std::memcpy(&a1, name.data() + n - 4, 4);
  std::memcpy(&b0, lower.data(), 4);
  std::memcpy(&b1, lower.data() + n - 4, 4);
  return (a0 | 0x20202020u) == b0 && (a1 | 0x20202020u) == b1;
}

// The fields whose values change how the message is framed or kept; every other field is only
// carried.
enum class Special { kNone, kContentLength, kConnection, kExpect, kDecline };

struct Kind {
  Special special = Special::kNone;
  std::uint8_t known = 0;  // Headers::Known bit
};

// The fields that matter, by name in lower case.
struct Field {
  std::string_view name;
  Kind kind;
};
constexpr Field kFields[] = {
    {"host", {Special::kNone, Headers::kHost}},
    {"expect", {Special::kExpect}},
    {"upgrade", {Special::kDecline}},
    {"user-agent", {Special::kNone, Headers::kUserAgent}},
    {"connection", {Special::kConnection, Headers::kConnection}},
    {"content-length", {Special::kContentLength}},
    {"proxy-connection", {Special::kConnection}},
    {"transfer-encoding", {Special::kDecline}},
};

// Sizes first: most names match no field's and are compared with none.
Kind classify(std::string_view name) {
  for (const Field& f : kFields) {
    if (f.name.size() == name.size() && tokenIs(name, f.name)) return f.kind;
  }
  return {};
}

// Reads one head; `end` is the input's end or the limit, whichever comes first.
class Reader {
 public:
  Reader(std::string_view in, std::size_t limit)
      : begin_(in.data()),
        p_(in.data()),
        end_(in.data() + std::min(in.size(), limit)),
        limited_(in.size() >= limit) {}

  // Where the reader ran out of bytes: more may come, unless the limit was reached.
  Outcome outOfBytes() const { return limited_ ? Outcome::kOverLimit : Outcome::kNeedMore; }

  // "HTTP/1.0" or "HTTP/1.1", into `v`. Wherever the bytes run out, what came so far must be
  // the start of one: a head is declined as soon as it cannot be simple, and over the limit only
  // if it could still have been.
  Outcome version(unsigned& v) {
    static constexpr std::string_view kPrefix = "HTTP/1.";
    const auto have = static_cast<std::size_t>(end_ - p_);
    const std::size_t n = std::min(have, kPrefix.size());
    if (n != 0 && std::memcmp(p_, kPrefix.data(), n) != 0) return Outcome::kDecline;
    if (have <= kPrefix.size()) return outOfBytes();
    if (p_[7] != '0' && p_[7] != '1') return Outcome::kDecline;
    v = p_[7] == '1' ? 11 : 10;
    p_ += 8;
    return Outcome::kParsed;
  }

  // Request line: METHOD SP target SP HTTP/1.x CRLF.
  Outcome requestLine(Head& head) {
    const char* const method = p_;
    while (p_ != end_ && *p_ >= 'A' && *p_ <= 'Z') ++p_;
    if (p_ == end_) return outOfBytes();
    if (*p_ != ' ' || p_ == method || p_ - method > 20) return Outcome::kDecline;
    head.method = std::string_view(method, static_cast<std::size_t>(p_ - method));
    const char* const target = ++p_;
    // The target: printable ASCII without spaces.
    p_ = findUnprintable(p_, end_);
    const char* const space =
        static_cast<const char*>(std::memchr(target, ' ', static_cast<std::size_t>(p_ - target)));
    if (space == nullptr) {
      if (p_ == end_) return outOfBytes();
      return Outcome::kDecline;
    }
    if (space == target) return Outcome::kDecline;
    head.target = std::string_view(target, static_cast<std::size_t>(space - target));
    p_ = space + 1;
    if (const Outcome v = version(head.version); v != Outcome::kParsed) return v;
    return lineEnd();
  }

  // Status line: HTTP/1.x SP 3DIGIT SP reason CRLF, with a status of 200..599 (1xx answers
  // precede the real one; Beast reads those).
  Outcome statusLine(Head& head) {
    if (const Outcome v = version(head.version); v != Outcome::kParsed) return v;
    // " DDD ", byte by byte: the first one that cannot be declines, running out is out of bytes.
    for (int i = 0; i < 5; ++i) {
      if (p_ + i == end_) return outOfBytes();
      const char c = p_[i];
      const bool fits = i == 0 || i == 4 ? c == ' '
                        : i == 1         ? c >= '2' && c <= '5'
                                         : c >= '0' && c <= '9';
      if (!fits) return Outcome::kDecline;
    }
    head.status = (p_[1] - '0') * 100 + (p_[2] - '0') * 10 + (p_[3] - '0');
    // The reason: printable ASCII, possibly empty.
    p_ = findUnprintable(p_ + 5, end_);
    if (p_ == end_) return outOfBytes();
    return lineEnd();
  }

  // The fields and the blank line after them.
  Outcome fields(Head& head, Headers& out) {
    // Lines already in wire form are appended in runs: [runStart, p_) holds runCount of them,
    // runKnown their names' Known bits.
    const char* runStart = p_;
    std::size_t runCount = 0;
    std::uint8_t runKnown = 0;
    const auto flush = [&](const char* runEnd) {
      if (runCount != 0) {
        out.appendWire(std::string_view(runStart, static_cast<std::size_t>(runEnd - runStart)),
                       runCount, runKnown);
      }
      runCount = 0;
      runKnown = 0;
    };
    for (;;) {
      if (p_ == end_) return outOfBytes();
      if (*p_ == '\r') {
        if (end_ - p_ < 2) return outOfBytes();
        if (p_[1] != '\n') return Outcome::kDecline;
        flush(p_);
        p_ += 2;
        head.size = static_cast<std::size_t>(p_ - begin_);
        return Outcome::kParsed;
      }
      const char* const name = p_;
      while (p_ != end_ && kTokenChars[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ == end_) return outOfBytes();
      if (*p_ != ':' || p_ == name) return Outcome::kDecline;  // obs-fold, a space, an empty name
      const std::string_view fieldName(name, static_cast<std::size_t>(p_ - name));
      ++p_;
      // Optional white space (spaces only: a tab goes to Beast), the value, the line's end.
      const char* value = p_;
      while (value != end_ && *value == ' ') ++value;
      const char* const cr = findUnprintable(value, end_);
      if (cr == end_) return outOfBytes();
      if (*cr != '\r') return Outcome::kDecline;
      if (end_ - cr < 2) return outOfBytes();
      if (cr[1] != '\n') return Outcome::kDecline;
      const char* valueEnd = cr;
      while (valueEnd != value && valueEnd[-1] == ' ') --valueEnd;
      const std::string_view fieldValue(value, static_cast<std::size_t>(valueEnd - value));

      const Kind kind = classify(fieldName);
      if (kind.special != Special::kNone && !take(kind.special, fieldValue, head)) {
        return Outcome::kDecline;
      }
      if (kind.special == Special::kContentLength) {
        // Framing, which the adapters write themselves: not kept (see MessageParser).
        flush(name);
        p_ = cr + 2;
        runStart = p_;
        continue;
      }
      // In wire form: exactly one space after the colon (none when the value is empty, which
      // Headers writes as "Name: \r\n"), none at the end.
      const bool wireForm = fieldValue.empty() ? (value == p_ + 1 && cr == value)
                                               : (value == p_ + 1 && valueEnd == cr);
      if (wireForm) {
        ++runCount;
        runKnown |= kind.known;
        p_ = cr + 2;
      } else {
        flush(name);
        out.addParsed(fieldName, fieldValue);
        p_ = cr + 2;
        runStart = p_;
      }
    }
  }

 private:
  Outcome lineEnd() {
    if (p_ == end_) return outOfBytes();
    if (p_[0] != '\r') return Outcome::kDecline;
    if (end_ - p_ < 2) return outOfBytes();
    if (p_[1] != '\n') return Outcome::kDecline;
    p_ += 2;
    return Outcome::kParsed;
  }

  // Takes in a field that changes the framing; false to decline the head.
  static bool take(Special special, std::string_view value, Head& head) {
    switch (special) {
      case Special::kContentLength: {
        // One field, of 1 to 19 digits (below 2^64): lists, a second field and anything else
        // are Beast's to judge.
        if (head.contentLength || value.empty() || value.size() > 19) return false;
        std::uint64_t n = 0;
        for (const char c : value) {
          if (c < '0' || c > '9') return false;
          n = n * 10 + static_cast<std::uint64_t>(c - '0');
        }
        head.contentLength = n;
        return true;
      }
      case Special::kConnection:
        if (equalsIgnoreCase(value, "close")) {
          head.connectionClose = true;
          return true;
        }
        if (equalsIgnoreCase(value, "keep-alive")) {
          head.connectionKeepAlive = true;
          return true;
        }
        return false;
      case Special::kExpect:
        if (equalsIgnoreCase(value, "100-continue")) head.expectContinue = true;
        return true;
      case Special::kNone:
        return true;
      case Special::kDecline:
        return false;
    }
    return false;
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
  const bool limited_;
};

// A head whose first line `firstLine` reads (a request line or a status line), then its fields.
inline Outcome parseHead(std::string_view in, std::size_t limit, Head& head, Headers& fields,
                         Outcome (Reader::*firstLine)(Head&)) {
  head = {};
  Reader reader(in, limit);
  const Outcome line = (reader.*firstLine)(head);
  if (line != Outcome::kParsed) return line;
  return reader.fields(head, fields);
}

}  // namespace

Outcome parseRequestHead(std::string_view in, std::size_t limit, Head& head, Headers& fields) {
  return parseHead(in, limit, head, fields, &Reader::requestLine);
}

Outcome parseResponseHead(std::string_view in, std::size_t limit, Head& head, Headers& fields) {
  return parseHead(in, limit, head, fields, &Reader::statusLine);
}

}  // namespace kshard::http::fast_head
