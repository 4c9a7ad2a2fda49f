#include "kube/backoff.h"

#include <algorithm>

namespace kshard::kube {

Duration jittered(Duration d, double jitter, Random& random) {
  if (jitter <= 0) return d;
  const double extra = static_cast<double>(d.count()) * jitter * random.unit();
  return d + Duration{static_cast<Duration::rep>(extra)};
}

Duration Backoff::next() {
  if (current_ == Duration{0}) {
    current_ = policy_.initial;
  } else {
    const double grown = static_cast<double>(current_.count()) * policy_.factor;
    current_ = grown >= static_cast<double>(policy_.max.count())
                   ? policy_.max
                   : Duration{static_cast<Duration::rep>(grown)};
  }
  current_ = std::min(current_, policy_.max);
  return jittered(current_, policy_.jitter, random_);
}

}  // namespace kshard::kube
