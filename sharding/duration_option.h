// Options (base/options.h) whose value is a Go duration ("15s", "1m30s"; sharding/duration.h),
// shown in --help as formatDuration writes the default. The binaries' timeouts and periods.
#pragma once

#include <string>
#include <utility>

#include "base/options.h"
#include "sharding/duration.h"

namespace kshard::sharding {

// A duration of at least `min`; a shorter one is refused with `tooShort` ("must be at least 10m").
inline CustomOption durationOption(Duration* target, Duration min, std::string tooShort) {
  return {formatDuration(*target),
          [target, min, tooShort = std::move(tooShort)](std::string_view v) {
            auto d = parseDuration(v);
            if (!d.ok()) return d.status();
            if (*d < min) return invalidArgument(tooShort);
            *target = *d;
            return Status{};
          }};
}

// Zero included (where zero turns a feature off, or means "at once").
inline CustomOption nonNegativeDuration(Duration* target) {
  return durationOption(target, Duration::zero(), "must not be negative");
}

inline CustomOption positiveDuration(Duration* target) {
  return durationOption(target, Duration(1), "must be greater than zero");
}

}  // namespace kshard::sharding
