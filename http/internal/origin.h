// Origin: the scheme, host and port of a ClientOptions::baseUrl, parsed once by the client
// adapters. Internal to http/.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace kshard::http {

struct Origin {
  bool tls = false;
  std::string host;  // without brackets for IPv6
  std::uint16_t port = 0;
  // What the Host header carries: host, plus ":port" unless it is the scheme's default.
  std::string hostHeader;
  // "http://host:port", for messages.
  std::string url;
};

// Accepts "http://host[:port]" and "https://host[:port]" with an optional trailing '/'; IPv6 hosts
// in brackets. InvalidArgument for anything else (a path, user info, an unknown scheme).
StatusOr<Origin> parseOrigin(const std::string& baseUrl);

}  // namespace kshard::http
