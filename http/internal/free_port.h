// Picks a free TCP port on an address by binding a throw-away socket to port 0. Internal to
// http/: only for listeners that cannot report the port they bound (cpprestsdk's).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace kshard::http {

// The port is free when this returns; another process may take it before the caller binds it.
StatusOr<std::uint16_t> pickFreePort(const std::string& host);

}  // namespace kshard::http
