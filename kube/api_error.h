// ApiError: a failed Kubernetes API call, parsed from the metav1.Status body the API server sends
// with every error, and its mapping onto kshard's StatusCode.
//
// Callers branch on the StatusCode of the Status they get back:
//   NotFound -> kNotFound            AlreadyExists -> kAlreadyExists   Conflict -> kConflict
//   Gone, Expired -> kGone           Unauthorized -> kUnauthenticated  Forbidden ->
//   kPermissionDenied Invalid, BadRequest -> kInvalidArgument (the field causes are kept in the
//   message) TooManyRequests, RequestEntityTooLarge -> kResourceExhausted ServiceUnavailable ->
//   kUnavailable   Timeout, ServerTimeout -> kDeadlineExceeded InternalError -> kInternal
// The message keeps the API server's own words. Plain values; thread-compatible.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kshard::kube {

struct ApiErrorCause {
  std::string reason;  // "FieldValueInvalid"
  std::string message;
  std::string field;  // "spec.shards"
};

struct ApiError {
  int httpStatus = 0;
  std::string reason;   // metav1.StatusReason ("Conflict"); empty when the body had none
  std::string message;  // the API server's message, or the raw body when it was not a Status
  std::vector<ApiErrorCause> causes;
  // details.retryAfterSeconds, or the Retry-After header when the caller sets it.
  std::optional<std::chrono::seconds> retryAfter;

  StatusCode code() const;
  // "<context>: <reason> (HTTP <code>): <message>[; <field>: <cause>...]".
  Status toStatus(std::string_view context) const;
};

// Parses the body of a non-2xx response. Never fails: a body that is not a Status becomes the
// message (truncated), and the reason then comes from the HTTP status.
ApiError parseApiError(int httpStatus, std::string_view body);
// Parses a metav1.Status object (the object of a watch ERROR event). `fallbackHttpStatus` is used
// when the object carries no code.
ApiError apiErrorFromStatus(const nlohmann::json& status, int fallbackHttpStatus = 500);

// The StatusCode for a reason; an empty or unknown reason falls back to the HTTP status.
StatusCode statusCodeFor(std::string_view reason, int httpStatus);

}  // namespace kshard::kube
