// Status and StatusOr<T>: how kshard reports failure without exceptions on the message path.
//
// A Status is a code plus a message an operator can act on. Library exceptions are turned into a
// Status in the adapter that called the library; everything above the adapters passes Status
// values.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kshard {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller sent something malformed; retrying the same input fails again
  kNotFound,            // the thing named does not exist
  kAlreadyExists,       // create of something that exists
  kConflict,            // optimistic concurrency lost (resourceVersion, epoch)
  kGone,                // a watch's resourceVersion is too old; relist
  kUnauthenticated,     // no or invalid credentials
  kPermissionDenied,    // credentials valid, action not allowed
  kFailedPrecondition,  // the system is not in a state where this can be done (e.g. not the leader)
  kResourceExhausted,   // rate limited, too large, out of capacity
  kUnavailable,         // transient: connection refused, 503, peer down; retrying may help
  kDeadlineExceeded,    // the operation did not finish in time
  kCancelled,           // the caller gave up or the component is shutting down
  // The request went out and the exchange broke before its answer: it may or may not have been
  // acted on. Never retried blindly (retrying could apply a message twice).
  kOutcomeUnknown,
  kInternal,            // a bug or an unexpected state
};

std::string_view statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status okStatus() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Unavailable: connection refused" (or "OK").
  std::string toString() const;

  // Returns a copy whose message is prefixed with context: "reading kubeconfig: <message>".
  Status withContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status notFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status deadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status failedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status internalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status outcomeUnknown(std::string m) {
  return {StatusCode::kOutcomeUnknown, std::move(m)};
}
inline Status unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status permissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status resourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}

// Either a value or a non-OK Status. Accessing the value of an error is a bug (asserted).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : state_(std::move(value)) {}        // NOLINT: implicit by design
  StatusOr(Status status) : state_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(state_).ok() && "StatusOr built from an OK Status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  Status status() const { return ok() ? Status{} : std::get<Status>(state_); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T valueOr(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<Status, T> state_;
};

}  // namespace kshard
