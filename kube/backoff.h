// Backoff: exponential delays with jitter between failed attempts (client-go's wait.Backoff with
// Jitter): delay = min(initial * factor^n, max) * (1 + jitter * u), u uniform in [0, 1).
// Not thread-safe: owned by one component, used under its lock.
#pragma once

#include "base/clock.h"
#include "base/random.h"

namespace kshard::kube {

struct BackoffPolicy {
  Duration initial = std::chrono::milliseconds(800);
  Duration max = std::chrono::seconds(30);
  double factor = 2.0;
  double jitter = 1.0;
};

class Backoff {
 public:
  Backoff(BackoffPolicy policy, Random& random) : policy_(policy), random_(random) {}
  // The next delay; each call grows the base until `max`.
  Duration next();
  void reset() { current_ = Duration{0}; }

 private:
  BackoffPolicy policy_;
  Random& random_;
  Duration current_{0};
};

// `d` stretched by up to `jitter` times itself, uniformly.
Duration jittered(Duration d, double jitter, Random& random);

}  // namespace kshard::kube
