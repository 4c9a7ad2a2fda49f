// LogThrottle: lets one kind of log line through at most once per interval, and says how many
// occurrences the line stands for, so that a fault hit by every entity or message (an app that
// is down) costs a line every few seconds instead of one per occurrence.
//
//   if (const std::uint64_t n = stopFailures_.occur(clock.now())) {
//     log.warn("entity stop failed", {{"occurrences", n}, {"error", e}});
//   }
//
// Not thread-safe: callers serialise, usually under the lock the occurrence is counted under.
#pragma once

#include <cstdint>

#include "base/clock.h"

namespace kshard {

class LogThrottle {
 public:
  explicit LogThrottle(Duration interval) : interval_(interval) {}

  // Counts one occurrence at `now`. Returns 0 when the line is to be left out, else the
  // occurrences it stands for: this one and those left out since the last line.
  std::uint64_t occur(SteadyTime now) {
    ++pending_;
    if (logged_ && now - last_ < interval_) return 0;
    logged_ = true;
    last_ = now;
    const std::uint64_t n = pending_;
    pending_ = 0;
    return n;
  }

 private:
  Duration interval_;
  bool logged_ = false;
  SteadyTime last_{};
  std::uint64_t pending_ = 0;
};

}  // namespace kshard
