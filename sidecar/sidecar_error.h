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

// The answer for a message the app did not answer: 502 AppUnavailable when it surely never
// reached the app (no connection), otherwise OutcomeUnknown (504 when no answer came in time,
// 502 when the exchange broke): the app may have applied it, and nobody sends it again.
inline http::Response appFailure(const Status& status) {
  if (status.code() == StatusCode::kUnavailable) {
    return sidecarError(502, protocol::errors::kAppUnavailable,
                        "the app could not be reached; the message was not delivered: " +
                            status.message());
  }
  const int code = status.code() == StatusCode::kDeadlineExceeded ? 504 : 502;
  return sidecarError(code, protocol::errors::kOutcomeUnknown,
                      "the app took the message but did not answer (" + status.message() +
                          "); it may have been applied");
}

}  // namespace kshard::sidecar
