#include "metrics/metrics.h"

namespace kshard::metrics {

const std::vector<double>& latencyBuckets() {
  // Roughly ×2.5 per step: fine enough around a local hop (sub-millisecond) and a cross-pod hop
  // (milliseconds), and still bounded at handoff scale (seconds).
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1.0,    2.5,     5.0,    10.0};
  return kBuckets;
}

}  // namespace kshard::metrics
