#include "sharding/duration.h"

#include <array>
#include <cstdint>
#include <utility>

namespace kshard::sharding {
namespace {

constexpr std::uint64_t kMaxMagnitude = std::uint64_t{1} << 63;  // |INT64_MIN|

struct Unit {
  std::string_view name;
  std::uint64_t nanos;
};

// Go's unitMap: "us" and both spellings of micro (U+00B5 micro sign, U+03BC Greek mu).
constexpr std::array<Unit, 8> kUnits = {{
    {"ns", 1},
    {"us", 1000},
    {"\xC2\xB5s", 1000},
    {"\xCE\xBCs", 1000},
    {"ms", 1000000},
    {"s", 1000000000},
    {"m", 60ULL * 1000000000},
    {"h", 3600ULL * 1000000000},
}};

bool isDigit(char c) { return c >= '0' && c <= '9'; }

Status invalid(std::string_view text, std::string_view why) {
  return invalidArgument("invalid duration \"" + std::string(text) + "\": " + std::string(why));
}

// Writes the fraction of v / 10^prec (without trailing zeros, and without the point when it is
// zero) in front of `end`; returns the new start and v / 10^prec. Go's fmtFrac.
std::pair<char*, std::uint64_t> prependFraction(char* end, std::uint64_t v, int prec) {
  bool print = false;
  for (int i = 0; i < prec; ++i) {
    const char digit = static_cast<char>('0' + v % 10);
    print = print || digit != '0';
    if (print) *--end = digit;
    v /= 10;
  }
  if (print) *--end = '.';
  return {end, v};
}

char* prependInt(char* end, std::uint64_t v) {
  do {
    *--end = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  return end;
}

}  // namespace

StatusOr<Duration> parseDuration(std::string_view text) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Duration::zero();
  if (s.empty()) return invalid(text, "empty");
  std::uint64_t total = 0;
  while (!s.empty()) {
    if (s[0] != '.' && !isDigit(s[0])) return invalid(text, "expected a number");
    // Integer part.
    std::uint64_t whole = 0;
    bool hasWhole = false;
    while (!s.empty() && isDigit(s[0])) {
      if (whole > (kMaxMagnitude - 1) / 10) return invalid(text, "overflow");
      whole = whole * 10 + static_cast<std::uint64_t>(s[0] - '0');
      if (whole > kMaxMagnitude) return invalid(text, "overflow");
      hasWhole = true;
      s.remove_prefix(1);
    }
    // Fraction: digits past what fits are ignored, as Go does.
    std::uint64_t fraction = 0;
    double scale = 1;
    bool hasFraction = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      bool saturated = false;
      while (!s.empty() && isDigit(s[0])) {
        hasFraction = true;
        const auto digit = static_cast<std::uint64_t>(s[0] - '0');
        s.remove_prefix(1);
        if (saturated || fraction > (kMaxMagnitude - 1) / 10 ||
            fraction * 10 + digit > kMaxMagnitude) {
          saturated = true;
          continue;
        }
        fraction = fraction * 10 + digit;
        scale *= 10;
      }
    }
    if (!hasWhole && !hasFraction) return invalid(text, "expected a number");
    std::size_t unitLength = 0;
    while (unitLength < s.size() && s[unitLength] != '.' && !isDigit(s[unitLength])) ++unitLength;
    if (unitLength == 0) return invalid(text, "missing unit");
    const std::string_view unitName = s.substr(0, unitLength);
    s.remove_prefix(unitLength);
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unitName) unit = &u;
    }
    if (unit == nullptr) {
      return invalid(text,
                     "unknown unit \"" + std::string(unitName) + "\" (use ns, us, ms, s, m or h)");
    }
    if (whole > kMaxMagnitude / unit->nanos) return invalid(text, "overflow");
    std::uint64_t value = whole * unit->nanos;
    if (fraction > 0) {
      value += static_cast<std::uint64_t>(static_cast<double>(fraction) *
                                          (static_cast<double>(unit->nanos) / scale));
      if (value > kMaxMagnitude) return invalid(text, "overflow");
    }
    total += value;
    if (total > kMaxMagnitude) return invalid(text, "overflow");
  }
  if (negative) return Duration(static_cast<std::int64_t>(0 - total));
  if (total > kMaxMagnitude - 1) return invalid(text, "overflow");
  return Duration(static_cast<std::int64_t>(total));
}

std::string formatDuration(Duration d) {
  // Go's time.Duration.String, digit for digit.
  std::array<char, 32> buf{};
  char* const end = buf.data() + buf.size();
  char* w = end;
  const std::int64_t n = d.count();
  const bool negative = n < 0;
  std::uint64_t u = static_cast<std::uint64_t>(n);
  if (negative) u = 0 - u;
  if (u < 1000000000) {
    int prec = 0;
    *--w = 's';
    if (u == 0) return "0s";
    if (u < 1000) {
      *--w = 'n';
    } else if (u < 1000000) {
      prec = 3;
      *--w = '\xB5';  // U+00B5 in UTF-8 is C2 B5
      *--w = '\xC2';
    } else {
      prec = 6;
      *--w = 'm';
    }
    auto [start, rest] = prependFraction(w, u, prec);
    w = prependInt(start, rest);
  } else {
    *--w = 's';
    auto [start, seconds] = prependFraction(w, u, 9);
    w = prependInt(start, seconds % 60);
    std::uint64_t minutes = seconds / 60;
    if (minutes > 0) {
      *--w = 'm';
      w = prependInt(w, minutes % 60);
      const std::uint64_t hours = minutes / 60;
      if (hours > 0) {
        *--w = 'h';
        w = prependInt(w, hours);
      }
    }
  }
  if (negative) *--w = '-';
  return std::string(w, end);
}

}  // namespace kshard::sharding
