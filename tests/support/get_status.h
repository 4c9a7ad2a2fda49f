// The status code of a GET, for tests that probe a server's endpoints (/readyz, /healthz).
#pragma once

#include <string>
#include <utility>

#include "http/client.h"

namespace kshard::testing {

// The status of GET `target` through `client`, or 0 when no answer came (nothing listens).
inline int getStatus(http::Client& client, std::string target) {
  http::Request r;
  r.target = std::move(target);
  auto res = client.sendSync(std::move(r));
  return res.ok() ? res->status : 0;
}

}  // namespace kshard::testing
