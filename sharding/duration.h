// Kubernetes duration strings ("20s", "1m30s", "500ms"), as used by the ShardMap spec.
//
// Kubernetes (metav1.Duration) reads and writes durations with Go's time.ParseDuration and
// time.Duration.String. We implement both exactly, so a ShardMap round-trips through the API
// server and `kubectl get -o yaml` unchanged:
//   - parse: an optional sign, then one or more <decimal number><unit> with units ns, us, µs, ms,
//     s, m, h ("1h15m", "1.5s", ".5m", "0"); a bare "0" needs no unit.
//   - format: "0s", "1.5µs", "500ms", "20s", "1m30s", "1h0m0s" (Go writes zero minutes and
//     seconds once the value has hours).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kshard::sharding {

using Duration = std::chrono::nanoseconds;

// InvalidArgument naming the problem (missing unit, unknown unit, overflow, garbage).
[[nodiscard]] StatusOr<Duration> parseDuration(std::string_view text);

std::string formatDuration(Duration d);

}  // namespace kshard::sharding
