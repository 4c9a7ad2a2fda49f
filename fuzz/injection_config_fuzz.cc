// The injector's YAML configuration (operator/injection_config.h, --injection-config), which the
// chart renders from user values: image, ports, limits, the sidecar's resources block.
//
// Checks: no input throws or crashes; an accepted config respects the documented limits, and the
// injector configured with it answers a plain annotated pod with an allowed AdmissionReview whose
// patch applies (so a bad value surfaces when the operator starts, not on the first pod).
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/base64.h"
#include "fuzz/checked_logger.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "operator/injection_config.h"
#include "operator/sidecar_injector.h"

namespace kshard::fuzz {
namespace {

using nlohmann::json;

const json& plainPod() {
  static const json pod = json::parse(R"({
    "metadata": {"name": "counter-0", "labels": {"app.kubernetes.io/name": "counter"},
                 "annotations": {"kshard.io/inject": "true"}},
    "spec": {"containers": [{"name": "app", "image": "counter", "ports": [{"containerPort": 8080}]}]}
  })");
  return pod;
}

}  // namespace

int fuzzOneInjectionConfig(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const StatusOr<manager::InjectionConfig> parsed = [&text] {
    try {
      return manager::parseInjectionConfig(text);
    } catch (const std::exception& e) {
      fail("parseInjectionConfig does not throw", std::string(e.what()) + " / " + text);
    }
  }();
  if (!parsed.ok()) return 0;
  const manager::InjectionConfig& cfg = *parsed;
  for (const std::int64_t port : {cfg.apiPort, cfg.peerPort, cfg.adminPort}) {
    check(port >= 1 && port <= 65535, "ports are in 1..65535", text);
  }
  check(!cfg.image.empty(), "there is an image", text);
  check(cfg.imagePullPolicy == "Always" || cfg.imagePullPolicy == "IfNotPresent" ||
            cfg.imagePullPolicy == "Never",
        "the pull policy is one Kubernetes knows", text);
  check(cfg.maxBodyBytes >= 1024, "maxBodyBytes is at least 1024", text);
  check(cfg.gracePeriodMarginSeconds >= 0, "the grace margin is not negative", text);
  check(cfg.resources.is_object(), "resources is a mapping", text);

  manager::SidecarInjector injector(
      cfg, [](const std::string&, const std::string&) { return std::nullopt; },
      checkedLogger("injector-fuzz"));
  const json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request", {{"uid", "u-1"}, {"namespace", "demo"}, {"operation", "CREATE"},
                   {"object", plainPod()}}}};
  manager::SidecarInjector::Answer answer;
  try {
    answer = injector.review(review.dump());
  } catch (const std::exception& e) {
    fail("an accepted config injects without throwing", std::string(e.what()) + " / " + text);
  }
  check(answer.httpStatus == 200, "a plain pod gets an AdmissionReview", answer.body);
  const json out = json::parse(answer.body);
  const json& response = out["response"];
  if (!response.value("allowed", false)) {
    // Only a clash between the sidecar's ports and the pod's app port may refuse this pod.
    check(cfg.apiPort == 8080 || cfg.peerPort == 8080 || cfg.adminPort == 8080,
          "a plain pod is allowed", answer.body);
    return 0;
  }
  const auto patch = base64Decode(response.value("patch", ""));
  check(patch.has_value(), "the patch is base64", answer.body);
  try {
    const json patched = plainPod().patch(json::parse(*patch));
    check(patched["metadata"]["annotations"].contains("kshard.io/injected"),
          "the patched pod is marked injected", patched.dump());
  } catch (const json::exception& e) {
    fail("the patch applies to the pod", std::string(e.what()) + " / " + *patch);
  }
  return 0;
}

}  // namespace kshard::fuzz
