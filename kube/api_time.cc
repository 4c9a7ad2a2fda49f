#include "kube/api_time.h"

#include <cstdint>
#include <cstdio>

namespace kshard::kube {
namespace {

using std::chrono::days;
using std::chrono::microseconds;
using std::chrono::seconds;
using std::chrono::sys_days;

struct Civil {
  int year, month, day, hour, minute, second;
  std::int64_t micros;  // 0..999999
};

Civil toCivil(WallTime t) {
  const auto us = std::chrono::floor<microseconds>(t.time_since_epoch());
  const auto dayStart = std::chrono::floor<days>(us);
  const std::chrono::year_month_day ymd{sys_days{dayStart}};
  std::int64_t rest = (us - dayStart).count();
  Civil c{};
  c.year = static_cast<int>(ymd.year());
  c.month = static_cast<int>(static_cast<unsigned>(ymd.month()));
  c.day = static_cast<int>(static_cast<unsigned>(ymd.day()));
  c.micros = rest % 1000000;
  rest /= 1000000;
  c.second = static_cast<int>(rest % 60);
  c.minute = static_cast<int>((rest / 60) % 60);
  c.hour = static_cast<int>(rest / 3600);
  return c;
}

std::string format(WallTime t, bool micro) {
  const Civil c = toCivil(t);
  char buf[40];
  if (micro) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", c.year, c.month, c.day,
                  c.hour, c.minute, c.second, static_cast<long long>(c.micros));
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year, c.month, c.day, c.hour,
                  c.minute, c.second);
  }
  return buf;
}

// Reads exactly `n` digits at `pos`.
bool digits(std::string_view s, std::size_t& pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  pos += n;
  return true;
}

bool expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

}  // namespace

std::string formatTime(WallTime t) { return format(t, false); }
std::string formatMicroTime(WallTime t) { return format(t, true); }

StatusOr<WallTime> parseTime(std::string_view s) {
  const auto bad = [&](std::string_view why) {
    return Status(StatusCode::kInvalidArgument,
                  "time \"" + std::string(s) + "\" is not RFC 3339: " + std::string(why));
  };
  std::size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!digits(s, pos, 4, year) || !expect(s, pos, '-') || !digits(s, pos, 2, month) ||
      !expect(s, pos, '-') || !digits(s, pos, 2, day)) {
    return bad("expected YYYY-MM-DD");
  }
  if (pos >= s.size() || (s[pos] != 'T' && s[pos] != 't')) return bad("expected 'T'");
  ++pos;
  if (!digits(s, pos, 2, hour) || !expect(s, pos, ':') || !digits(s, pos, 2, minute) ||
      !expect(s, pos, ':') || !digits(s, pos, 2, second)) {
    return bad("expected hh:mm:ss");
  }
  std::int64_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t n = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (n < 9) nanos = nanos * 10 + (s[pos] - '0');
      ++n;
      ++pos;
    }
    if (n == 0) return bad("empty fraction");
    for (std::size_t i = n; i < 9; ++i) nanos *= 10;
  }
  int offsetMinutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!digits(s, pos, 2, oh) || !expect(s, pos, ':') || !digits(s, pos, 2, om)) {
      return bad("bad offset");
    }
    offsetMinutes = sign * (oh * 60 + om);
  } else {
    return bad("missing time zone");
  }
  if (pos != s.size()) return bad("trailing characters");
  const std::chrono::year_month_day ymd{std::chrono::year{year},
                                        std::chrono::month{static_cast<unsigned>(month)},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 60) return bad("field out of range");
  // In whole seconds first: nanoseconds since 1970 (WallTime) only reach the years 1677..2262,
  // and Kubernetes writes its zero time as year 1.
  const seconds whole = sys_days{ymd}.time_since_epoch() + std::chrono::hours(hour) +
                        std::chrono::minutes(minute - offsetMinutes) + seconds(second);
  const auto limit = std::chrono::duration_cast<seconds>(WallTime::duration::max()) - seconds(1);
  if (whole > limit || whole < -limit) return bad("outside the years this clock can hold");
  return WallTime{std::chrono::duration_cast<WallTime::duration>(whole) +
                  std::chrono::nanoseconds(nanos)};
}

}  // namespace kshard::kube
