// Kubernetes timestamps: metav1.Time ("2024-05-01T10:00:00Z", whole seconds) and metav1.MicroTime
// ("2024-05-01T10:00:00.123456Z", used by Leases and events.k8s.io Events), always in UTC.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace kshard::kube {

// RFC 3339 with whole seconds: metav1.Time.
std::string formatTime(WallTime t);
// RFC 3339 with exactly six fractional digits: metav1.MicroTime.
std::string formatMicroTime(WallTime t);
// Parses either form (any number of fractional digits, "Z" or a numeric offset), as the API
// server accepts them. InvalidArgument names what is wrong.
StatusOr<WallTime> parseTime(std::string_view text);

}  // namespace kshard::kube
