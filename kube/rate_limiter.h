// TokenBucket: the client-side rate limit of Kubernetes requests (client-go's flowcontrol
// token bucket). client-go's defaults (5 QPS, burst 10) are too low for an operator that watches
// many pods; kube::ClientOptions defaults to 50 QPS, burst 100.
//
// Its queue is bounded by time: a reservation that would wait longer than `maxWait` is refused
// (ResourceExhausted) without taking a token, so a flood of requests (e.g. TokenReviews for
// callers of the manager API) cannot push every later request, a Lease renewal among them,
// minutes into the future. client-go's limiter waits without bound.
#pragma once

#include <mutex>

#include "base/clock.h"
#include "base/status.h"

namespace kshard::kube {

// Thread-safe.
class TokenBucket {
 public:
  // `qps` <= 0 disables limiting. `burst` >= 1 tokens are available at start.
  TokenBucket(const Clock& clock, double qps, int burst, Duration maxWait = Duration::max());
  // Takes one token and returns how long the caller must wait before using it (zero when one was
  // available). Waiting callers queue fairly: each reservation pushes the next one further out.
  // ResourceExhausted, taking nothing, when the wait would exceed maxWait.
  [[nodiscard]] StatusOr<Duration> reserve();

 private:
  const Clock& clock_;
  const double qps_;
  const double burst_;
  const Duration maxWait_;
  std::mutex mu_;
  double tokens_;
  SteadyTime last_;
};

}  // namespace kshard::kube
