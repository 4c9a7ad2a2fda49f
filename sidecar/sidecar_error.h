// The sidecar's own error answers: kshard's JSON error body plus the Kshard-Error header, which
// tells a caller (another sidecar, the app) that the sidecar, not the app, produced the status.
#pragma once

#include <string_view>

#include "http/message.h"
#include "protocol/wire.h"

namespace kshard::sidecar {

inline http::Response sidecarError(int status, std::string_view code, std::string_view message) {
  http::Response r = http::Response::error(status, code, message);
  r.headers.set(std::string(protocol::kErrorHeader), std::string(code));
  return r;
}

}  // namespace kshard::sidecar
