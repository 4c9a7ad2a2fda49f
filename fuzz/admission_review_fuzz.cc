// AdmissionReview requests from the API server to the sidecar injector
// (operator/sidecar_injector.h). The pod in them is whatever a user wrote, so the injector must
// answer every body without throwing, and a patch it returns must apply.
//
// Checks: the answer is 400 with kshard's error shape or 200 with an AdmissionReview for the same
// uid; a denial says why; a patch is base64 of a JSON Patch array that applies (RFC 6902, with
// nlohmann's json::patch) to any structurally valid pod, gives it the sidecar and the ShardMap
// label, and reviewing the patched pod again changes nothing (injection is idempotent).
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/base64.h"
#include "fuzz/checked_logger.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "operator/sidecar_injector.h"

namespace kshard::fuzz {
namespace {

using nlohmann::json;

// A pod the API server could have sent: the fields the patch paths walk through have the types
// Kubernetes' schema gives them. Only for such pods must a patch apply.
bool structurallyValidPod(const json& pod) {
  if (!pod.is_object() || !pod.contains("metadata") || !pod["metadata"].is_object()) return false;
  const json& metadata = pod["metadata"];
  for (const char* map : {"labels", "annotations"}) {
    if (metadata.contains(map) && !metadata[map].is_object()) return false;
  }
  if (!pod.contains("spec") || !pod["spec"].is_object()) return false;
  const json& spec = pod["spec"];
  if (!spec.contains("containers") || !spec["containers"].is_array() ||
      spec["containers"].empty()) {
    return false;
  }
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list)) continue;
    if (!spec[list].is_array()) return false;
    for (const json& c : spec[list]) {
      if (!c.is_object()) return false;
      // The API server decodes the pod before admission: a name that is not a string never
      // reaches the webhook.
      if (c.contains("name") && !c["name"].is_string()) return false;
      if (c.contains("lifecycle") && !c["lifecycle"].is_object()) return false;
    }
  }
  return true;
}

manager::SidecarInjector::Answer review(const manager::SidecarInjector& injector,
                                        std::string_view body) {
  try {
    return injector.review(body);
  } catch (const std::exception& e) {
    fail("SidecarInjector::review does not throw",
         std::string(e.what()) + " / " + std::string(body));
  }
}

json parseAnswer(const manager::SidecarInjector::Answer& answer, std::string_view body) {
  check(answer.httpStatus == 200 || answer.httpStatus == 400, "the injector answers 200 or 400",
        body);
  const json out = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  check(!out.is_discarded() && out.is_object(), "the answer is a JSON object", answer.body);
  if (answer.httpStatus == 400) {
    check(out.contains("error") && out["error"].is_object() && out["error"].contains("message"),
          "a 400 has kshard's error shape", answer.body);
  }
  return out;
}

}  // namespace

int fuzzOneAdmissionReview(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  manager::InjectionConfig config;
  config.nativeSidecar = in.flag();
  const bool haveSpec = in.flag();
  sharding::ShardMapSpec spec;
  spec.shards = 10;
  spec.handoffTimeout = std::chrono::seconds(in.inRange(0, 100000));
  const std::string_view body = in.rest();

  manager::SidecarInjector injector(
      config,
      [haveSpec, spec](const std::string&, const std::string&) {
        return haveSpec ? std::optional(spec) : std::nullopt;
      },
      checkedLogger("injector-fuzz"));

  const manager::SidecarInjector::Answer answer = review(injector, body);
  const json out = parseAnswer(answer, body);
  if (answer.httpStatus != 200) return 0;

  const json request = json::parse(body);  // the injector accepted it, so it parses
  check(out.value("kind", "") == "AdmissionReview" && out.contains("response") &&
            out["response"].is_object(),
        "a 200 is an AdmissionReview", answer.body);
  const json& response = out["response"];
  check(response.contains("uid") && response["uid"] == request["request"]["uid"],
        "the response carries the request's uid", answer.body);
  check(response.contains("allowed") && response["allowed"].is_boolean(), "allowed is a boolean",
        answer.body);
  if (!response["allowed"].get<bool>()) {
    check(response.contains("status") && response["status"].contains("message") &&
              response["status"]["message"].is_string() &&
              !response["status"]["message"].get<std::string>().empty(),
          "a denial says why", answer.body);
    check(!response.contains("patch"), "a denial carries no patch", answer.body);
    return 0;
  }
  if (!response.contains("patch")) return 0;

  check(response.value("patchType", "") == "JSONPatch", "the patch type is JSONPatch", answer.body);
  check(response["patch"].is_string(), "the patch is a string", answer.body);
  const auto patchText = base64Decode(response["patch"].get<std::string>());
  check(patchText.has_value(), "the patch is base64", answer.body);
  const json patch = json::parse(*patchText, nullptr, /*allow_exceptions=*/false);
  check(patch.is_array() && !patch.empty(), "the patch is a non-empty JSON Patch array",
        *patchText);

  const json& pod = request["request"]["object"];
  if (!structurallyValidPod(pod)) return 0;
  json patched;
  try {
    patched = pod.patch(patch);
  } catch (const json::exception& e) {
    fail("the injector's patch applies to the pod",
         std::string(e.what()) + " / patch " + *patchText + " / pod " + pod.dump());
  }
  bool hasSidecar = false;
  for (const char* list : {"containers", "initContainers"}) {
    if (!patched["spec"].contains(list)) continue;
    for (const json& c : patched["spec"][list]) {
      hasSidecar = hasSidecar || c.value("name", "") == manager::kSidecarContainerName;
    }
  }
  check(hasSidecar, "the patched pod has the sidecar", patched.dump());
  check(patched["metadata"].contains("labels") &&
            patched["metadata"]["labels"].contains("kshard.io/shard-map"),
        "the patched pod has the ShardMap label", patched.dump());

  json again = request;
  again["request"]["object"] = patched;
  const auto second = review(injector, again.dump());
  const json secondOut = parseAnswer(second, again.dump());
  check(second.httpStatus == 200 && secondOut["response"].value("allowed", false) &&
            !secondOut["response"].contains("patch"),
        "injecting an injected pod changes nothing", second.body);
  return 0;
}

}  // namespace kshard::fuzz
