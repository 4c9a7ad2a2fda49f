// TokenBucket: the client-side rate limit of Kubernetes requests (client-go's flowcontrol
// token bucket). client-go's defaults (5 QPS, burst 10) are too low for an operator that watches
// many pods; kube::ClientOptions defaults to 50 QPS, burst 100.
#pragma once

#include <mutex>

#include "base/clock.h"

namespace kshard::kube {

// Thread-safe.
class TokenBucket {
 public:
  // `qps` <= 0 disables limiting. `burst` >= 1 tokens are available at start.
  TokenBucket(const Clock& clock, double qps, int burst);
  // Takes one token and returns how long the caller must wait before using it (zero when one was
  // available). Waiting callers queue fairly: each reservation pushes the next one further out.
  Duration reserve();

 private:
  const Clock& clock_;
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  SteadyTime last_;
};

}  // namespace kshard::kube
