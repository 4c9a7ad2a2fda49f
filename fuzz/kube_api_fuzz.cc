// What the Kubernetes API server sends back besides objects: the metav1.Status body of every
// failed call (kube/api_error.h) and RFC 3339 timestamps (kube/api_time.h).
//
// Checks: parseApiError never fails and never throws, whatever the body; its Status is an error
// whose code follows the reason or the HTTP status; a raw body stays bounded in the message.
// parseTime accepts only well-formed times with in-range fields, and a parsed time formats (as
// metav1.MicroTime) to text that parses back to the same microsecond.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "kube/api_error.h"
#include "kube/api_time.h"

namespace kshard::fuzz {

int fuzzOneKubeApi(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const int httpStatus = static_cast<int>(in.inRange(100, 599));
  const bool asTime = in.flag();
  const std::string_view text = in.rest();

  if (!asTime) {
    const kube::ApiError e = kube::parseApiError(httpStatus, text);
    check(e.httpStatus == httpStatus, "the HTTP status is kept", text);
    const Status s = e.toStatus("fuzz");
    check(!s.ok(), "an API error is never OK", text);
    check(s.code() == kube::statusCodeFor(e.reason, httpStatus), "the code follows the reason",
          text);
    const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const bool isStatus = json.is_object() && json.contains("kind") && json["kind"] == "Status";
    if (!isStatus) {
      check(e.message.size() <= 512 + 3, "a raw body is truncated in the message", text);
      check(e.reason.empty() && e.causes.empty(), "only a Status has a reason", text);
    }
    return 0;
  }

  const auto parsed = kube::parseTime(text);
  if (!parsed.ok()) {
    check(!parsed.status().message().empty(), "a parse error says why");
    return 0;
  }
  check(text.size() >= 20 && (text[10] == 'T' || text[10] == 't'), "only RFC 3339 parses", text);
  // parseTime refuses what WallTime cannot hold, so every parsed time is a four-digit year that
  // RFC 3339 can write back.
  using namespace std::chrono;
  const std::string micro = kube::formatMicroTime(*parsed);
  const auto again = kube::parseTime(micro);
  check(again.ok() && *again == floor<microseconds>(*parsed),
        "parse(formatMicroTime(t)) is t to the microsecond", std::string(text) + " -> " + micro);
  const std::string seconds = kube::formatTime(*parsed);
  const auto whole = kube::parseTime(seconds);
  check(whole.ok() && *whole == floor<std::chrono::seconds>(*parsed),
        "parse(formatTime(t)) is t to the second", std::string(text) + " -> " + seconds);
  return 0;
}

}  // namespace kshard::fuzz
