#include "kube/rate_limiter.h"

#include <algorithm>
#include <string>

namespace kshard::kube {

TokenBucket::TokenBucket(const Clock& clock, double qps, int burst, Duration maxWait)
    : clock_(clock),
      qps_(qps),
      burst_(std::max(1, burst)),
      maxWait_(maxWait),
      tokens_(static_cast<double>(std::max(1, burst))),
      last_(clock.now()) {}

StatusOr<Duration> TokenBucket::reserve() {
  if (qps_ <= 0) return Duration{0};
  std::lock_guard lock(mu_);
  const SteadyTime now = clock_.now();
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return Duration{0};
  }
  // The deficit, this reservation's included, is repaid at qps tokens per second.
  const std::chrono::duration<double> wait((1.0 - tokens_) / qps_);
  if (wait > maxWait_) {
    return resourceExhausted(
        "the client-side rate limit of " + std::to_string(static_cast<long long>(qps_)) +
        " requests/s is saturated: the request would wait more than " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(maxWait_).count()) +
        " ms");
  }
  tokens_ -= 1.0;
  return std::chrono::duration_cast<Duration>(wait);
}

}  // namespace kshard::kube
