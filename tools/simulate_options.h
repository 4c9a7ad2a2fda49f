// Option setters `kshardctl simulate` shares between its scenario and workload modes: integers
// and fractions in a range, Kubernetes durations, and comma-separated lists of names.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/options.h"
#include "sharding/duration.h"
#include "tools/command.h"
#include "tools/simulate_ledger.h"

namespace kshard::tools {

inline std::vector<std::string_view> splitList(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

template <typename T>
bool parseInteger(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

template <typename T>
OptionSet::Setter integer(T* target, T min, T max) {
  return [=](std::string_view v) {
    T n{};
    if (!parseInteger(v, n) || n < min || n > max) {
      return invalidArgument("must be an integer in " + std::to_string(min) + ".." +
                             std::to_string(max) + ", not \"" + std::string(v) + "\"");
    }
    *target = n;
    return Status{};
  };
}

// Any finite number; the range is checked with the rest of the configuration.
inline OptionSet::Setter real(double* target) {
  return [=](std::string_view v) {
    const std::string s(v);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d)) {
      return invalidArgument("must be a number, not \"" + s + "\"");
    }
    *target = d;
    return Status{};
  };
}

// A number in (0, 1].
inline OptionSet::Setter fraction(double* target) {
  return [=](std::string_view v) {
    double d = 0;
    if (Status s = real(&d)(v); !s.ok() || !(d > 0 && d <= 1)) {
      return invalidArgument("must be a number in (0, 1], not \"" + std::string(v) + "\"");
    }
    *target = d;
    return Status{};
  };
}

inline OptionSet::Setter duration(SimTime* target, bool positive) {
  return [=](std::string_view v) {
    StatusOr<sharding::Duration> d = sharding::parseDuration(v);
    if (!d.ok()) return invalidArgument(d.status().message());
    if (*d < SimTime{0} || (positive && *d == SimTime{0})) {
      return invalidArgument(std::string("must be ") + (positive ? "positive" : "0 or more") +
                             ", not \"" + std::string(v) + "\"");
    }
    *target = *d;
    return Status{};
  };
}

template <typename T>
OptionSet::Setter nameList(std::vector<T>* target, std::optional<T> (*parse)(std::string_view),
                           std::string_view known) {
  return [=](std::string_view v) {
    std::vector<T> parsed;
    for (std::string_view part : splitList(v)) {
      const std::optional<T> item = parse(part);
      if (!item) {
        return invalidArgument("unknown name \"" + std::string(part) +
                               "\" (known: " + std::string(known) + ")");
      }
      parsed.push_back(*item);
    }
    *target = std::move(parsed);
    return Status{};
  };
}

}  // namespace kshard::tools
