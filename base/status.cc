#include "base/status.h"

#include <utility>

#include "base/enum_names.h"

namespace kshard {

namespace {

constexpr std::pair<StatusCode, std::string_view> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "InvalidArgument"},
    {StatusCode::kNotFound, "NotFound"},
    {StatusCode::kAlreadyExists, "AlreadyExists"},
    {StatusCode::kConflict, "Conflict"},
    {StatusCode::kGone, "Gone"},
    {StatusCode::kUnauthenticated, "Unauthenticated"},
    {StatusCode::kPermissionDenied, "PermissionDenied"},
    {StatusCode::kFailedPrecondition, "FailedPrecondition"},
    {StatusCode::kResourceExhausted, "ResourceExhausted"},
    {StatusCode::kUnavailable, "Unavailable"},
    {StatusCode::kDeadlineExceeded, "DeadlineExceeded"},
    {StatusCode::kCancelled, "Cancelled"},
    {StatusCode::kOutcomeUnknown, "OutcomeUnknown"},
    {StatusCode::kInternal, "Internal"}};

}  // namespace

std::string_view statusCodeName(StatusCode code) {
  return nameIn(kStatusCodeNames, code, "Unknown");
}

std::string Status::toString() const {
  if (ok()) return "OK";
  std::string out(statusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::withContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

}  // namespace kshard
