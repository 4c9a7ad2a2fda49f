#include "kube/api_error.h"

#include <utility>

namespace kshard::kube {
namespace {

constexpr std::size_t kMaxRawMessage = 512;

StatusCode codeForHttpStatus(int httpStatus) {
  using enum StatusCode;
  static constexpr std::pair<int, StatusCode> kStatuses[] = {
      {400, kInvalidArgument},   {405, kInvalidArgument},
      {406, kInvalidArgument},   {415, kInvalidArgument},
      {422, kInvalidArgument},   {401, kUnauthenticated},
      {403, kPermissionDenied},  {404, kNotFound},
      {409, kConflict},          {410, kGone},
      {413, kResourceExhausted}, {429, kResourceExhausted},
      {500, kInternal},          {504, kDeadlineExceeded}};
  for (const auto& [status, code] : kStatuses) {
    if (status == httpStatus) return code;
  }
  if (httpStatus >= 500) return kUnavailable;
  return kFailedPrecondition;
}

std::string stringField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

}  // namespace

StatusCode statusCodeFor(std::string_view reason, int httpStatus) {
  struct Entry {
    std::string_view reason;
    StatusCode code;
  };
  static constexpr Entry kReasons[] = {
      {"NotFound", StatusCode::kNotFound},
      {"AlreadyExists", StatusCode::kAlreadyExists},
      {"Conflict", StatusCode::kConflict},
      {"Gone", StatusCode::kGone},
      {"Expired", StatusCode::kGone},
      {"Unauthorized", StatusCode::kUnauthenticated},
      {"Forbidden", StatusCode::kPermissionDenied},
      {"Invalid", StatusCode::kInvalidArgument},
      {"BadRequest", StatusCode::kInvalidArgument},
      {"MethodNotAllowed", StatusCode::kInvalidArgument},
      {"NotAcceptable", StatusCode::kInvalidArgument},
      {"UnsupportedMediaType", StatusCode::kInvalidArgument},
      {"TooManyRequests", StatusCode::kResourceExhausted},
      {"RequestEntityTooLarge", StatusCode::kResourceExhausted},
      {"ServiceUnavailable", StatusCode::kUnavailable},
      {"Timeout", StatusCode::kDeadlineExceeded},
      {"ServerTimeout", StatusCode::kDeadlineExceeded},
      {"InternalError", StatusCode::kInternal},
  };
  for (const auto& e : kReasons) {
    if (e.reason == reason) return e.code;
  }
  return codeForHttpStatus(httpStatus);
}

StatusCode ApiError::code() const { return statusCodeFor(reason, httpStatus); }

Status ApiError::toStatus(std::string_view context) const {
  std::string m(context);
  if (!m.empty()) m += ": ";
  m += reason.empty() ? std::string("HTTP ") + std::to_string(httpStatus)
                      : reason + " (HTTP " + std::to_string(httpStatus) + ")";
  if (!message.empty()) {
    m += ": ";
    m += message;
  }
  // The API server usually repeats field errors in its message; add only those it did not.
  for (const auto& c : causes) {
    if (!c.message.empty() && message.find(c.message) != std::string::npos) continue;
    m += "; ";
    if (!c.field.empty()) m += c.field + ": ";
    m += c.message.empty() ? c.reason : c.message;
  }
  return Status(code(), std::move(m));
}

ApiError apiErrorFromStatus(const nlohmann::json& status, int fallbackHttpStatus) {
  ApiError e;
  e.httpStatus = fallbackHttpStatus;
  if (!status.is_object()) {
    e.message = status.dump();
    return e;
  }
  if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    const int code = it->get<int>();
    if (code > 0) e.httpStatus = code;
  }
  e.reason = stringField(status, "reason");
  e.message = stringField(status, "message");
  if (auto d = status.find("details"); d != status.end() && d->is_object()) {
    if (auto r = d->find("retryAfterSeconds"); r != d->end() && r->is_number_integer()) {
      const auto secs = r->get<long long>();
      if (secs > 0) e.retryAfter = std::chrono::seconds(secs);
    }
    if (auto cs = d->find("causes"); cs != d->end() && cs->is_array()) {
      for (const auto& c : *cs) {
        if (!c.is_object()) continue;
        e.causes.push_back(
            {stringField(c, "reason"), stringField(c, "message"), stringField(c, "field")});
      }
    }
  }
  return e;
}

ApiError parseApiError(int httpStatus, std::string_view body) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && stringField(parsed, "kind") == "Status") {
    ApiError e = apiErrorFromStatus(parsed, httpStatus);
    // The HTTP status is what the server answered; a Status body with another code is odd but
    // the transport-level code decides retries, so keep it.
    e.httpStatus = httpStatus;
    return e;
  }
  ApiError e;
  e.httpStatus = httpStatus;
  e.message = std::string(body.substr(0, kMaxRawMessage));
  if (body.size() > kMaxRawMessage) e.message += "...";
  while (!e.message.empty() && (e.message.back() == '\n' || e.message.back() == '\r')) {
    e.message.pop_back();
  }
  return e;
}

}  // namespace kshard::kube
