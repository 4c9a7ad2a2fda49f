#include "kube/rate_limiter.h"

#include <algorithm>

namespace kshard::kube {

TokenBucket::TokenBucket(const Clock& clock, double qps, int burst)
    : clock_(clock),
      qps_(qps),
      burst_(std::max(1, burst)),
      tokens_(static_cast<double>(std::max(1, burst))),
      last_(clock.now()) {}

Duration TokenBucket::reserve() {
  if (qps_ <= 0) return Duration{0};
  std::lock_guard lock(mu_);
  const SteadyTime now = clock_.now();
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1.0;
  if (tokens_ >= 0) return Duration{0};
  // The deficit is repaid at qps tokens per second.
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

}  // namespace kshard::kube
