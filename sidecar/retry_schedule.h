// RetrySchedule: when a send that surely did not reach its receiver is tried again (Router,
// TopicPublisher): steps from `initial`, doubling up to `max`, each wait drawn with equal jitter
// (half the step fixed, half random), so that retries from many senders spread out but none
// waits much longer than planned. Thread-safe: one schedule serves every send of its owner.
#pragma once

#include <algorithm>
#include <mutex>

#include "base/clock.h"
#include "base/random.h"

namespace kshard::sidecar {

class RetrySchedule {
 public:
  RetrySchedule(Random& random, Duration initial, Duration max)
      : random_(random), initial_(initial), max_(max) {}

  // The step of a send's first retry.
  Duration initial() const { return initial_; }
  // The step after `step`.
  Duration next(Duration step) const { return std::min(step * 2, max_); }
  // The wait before a retry at `step`: in [step / 2, step].
  Duration wait(Duration step) {
    const auto half = step / 2;
    std::lock_guard lock(mu_);
    const auto extra = random_.uniform(static_cast<std::uint64_t>(half.count()) + 1);
    return half + Duration(static_cast<Duration::rep>(extra));
  }

 private:
  std::mutex mu_;
  Random& random_;
  const Duration initial_;
  const Duration max_;
};

}  // namespace kshard::sidecar
