// SidecarInjector: the mutating admission webhook that adds kshard to annotated pods
// (DESIGN.md "Sidecar injection"), as a pure function of the AdmissionReview.
//
// For a pod annotated kshard.io/inject: "true" it patches in (JSONPatch):
//   - the label kshard.io/shard-map=<name> (annotation kshard.io/shard-map, else the pod's
//     app.kubernetes.io/name or app label), which the operator watches;
//   - the kshard-sidecar container, as a native sidecar (the first init container, restartPolicy
//     Always: it starts before the app and stops after it) or a regular container, with the
//     downward-API environment, its ports and probes;
//   - a preStop hook on the app container, when it has none: GET /v1/drain on the sidecar's admin
//     port, so the pod's entities are stopped and its shards handed off while the app still runs;
//   - terminationGracePeriodSeconds of at least the ShardMap's handoffTimeout plus a margin.
// Injection is idempotent (a pod that already has the sidecar is left alone). Nothing here
// throws: a malformed review gets a 400 answer, a pod that cannot be injected is denied with the
// reason.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/logger.h"
#include "base/status.h"
#include "operator/injection_config.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

inline constexpr char kSidecarContainerName[] = "kshard-sidecar";
// The projected service-account token the sidecar sends to the operator (audience kshard).
inline constexpr char kTokenVolumeName[] = "kshard-token";
inline constexpr char kTokenMountPath[] = "/var/run/secrets/kshard.io/token";
inline constexpr char kTokenAudienceName[] = "kshard";

class SidecarInjector {
 public:
  // The spec of an existing ShardMap, to follow its versionLabel and handoffTimeout.
  using SpecLookup = std::function<std::optional<sharding::ShardMapSpec>(const std::string& ns,
                                                                         const std::string& name)>;

  SidecarInjector(InjectionConfig config, SpecLookup lookup, Logger logger);

  struct Answer {
    int httpStatus = 200;
    std::string body;  // an AdmissionReview, or a JSON error for a malformed request
  };
  // Answers one AdmissionReview (admission.k8s.io/v1) request body.
  Answer review(std::string_view body) const;

  // The JSON patch for `pod` created in namespace `ns`: an empty array when nothing is to change,
  // InvalidArgument (the denial's message) when the pod cannot be injected.
  [[nodiscard]] StatusOr<nlohmann::json> patchFor(const nlohmann::json& pod,
                                                  const std::string& ns) const;

 private:
  nlohmann::json sidecarContainer(const std::string& shardMap, std::int64_t appPort,
                                  const std::string& versionLabel) const;

  InjectionConfig config_;
  SpecLookup lookup_;
  Logger log_;
};

// "kshard.io/shard-map" -> "kshard.io~1shard-map" (RFC 6901).
std::string jsonPointerEscape(std::string_view key);

}  // namespace kshard::manager
