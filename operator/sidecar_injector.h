// SidecarInjector: the mutating admission webhook that adds kshard to annotated pods
// (DESIGN.md "Sidecar injection"), as a pure function of the AdmissionReview.
//
// For a pod annotated kshard.io/inject: "true" it patches in (JSONPatch):
//   - the label kshard.io/shard-map=<name> (annotation kshard.io/shard-map, else the pod's
//     app.kubernetes.io/name or app label), which the operator watches;
//   - the kshard-sidecar container, as a native sidecar (the first init container, restartPolicy
//     Always: it starts before the app and stops after it) or a regular container, with the
//     downward-API environment, its ports and probes;
//   - a preStop hook on the app container: GET /v1/drain on the sidecar's admin port, with a
//     per-pod token (Kshard-Drain-Token) that only this pod's spec knows, so the pod's entities
//     are stopped and its shards handed off while the app still runs. An app's own httpGet or
//     sleep hook moves to the sidecar (KSHARD_APP_PRESTOP), which runs it once the drain is over;
//     an exec hook stays (the sidecar cannot run it), with a warning: that pod drains only after
//     the app exited;
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
#include <vector>

#include "base/logger.h"
#include "base/status.h"
#include "operator/injection_config.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

inline constexpr char kSidecarContainerName[] = "kshard-sidecar";
// The sidecar's projected service-account tokens, one per direction (protocol/audiences.h), in
// one volume mounted into the sidecar only: `operator` (audience kshard.io/operator) for the
// manager API, `peer` (audience kshard.io/peer/<namespace>/<shard-map>) for the other sidecars.
inline constexpr char kTokenVolumeName[] = "kshard-token";
inline constexpr char kTokenMountPath[] = "/var/run/secrets/kshard.io/token";
inline constexpr char kOperatorTokenFile[] = "operator";
inline constexpr char kPeerTokenFile[] = "peer";

class SidecarInjector {
 public:
  // The spec of an existing ShardMap, to follow its versionLabel and handoffTimeout.
  using SpecLookup = std::function<std::optional<sharding::ShardMapSpec>(const std::string& ns,
                                                                         const std::string& name)>;

  // Per-pod secrets (the drain hook's token): random by default; tests pass their own.
  using SecretSource = std::function<std::string()>;

  SidecarInjector(InjectionConfig config, SpecLookup lookup, Logger logger,
                  SecretSource secrets = nullptr);

  struct Answer {
    int httpStatus = 200;
    std::string body;  // an AdmissionReview, or a JSON error for a malformed request
  };
  // Answers one AdmissionReview (admission.k8s.io/v1) request body.
  Answer review(std::string_view body) const;

  // The JSON patch for `pod` created in namespace `ns`: an empty array when nothing is to change,
  // InvalidArgument (the denial's message) when the pod cannot be injected. What the user should
  // know (the admission response's warnings) is appended to `warnings` when given.
  [[nodiscard]] StatusOr<nlohmann::json> patchFor(const nlohmann::json& pod, const std::string& ns,
                                                  std::vector<std::string>* warnings = nullptr) const;

 private:
  nlohmann::json sidecarContainer(const std::string& shardMap, std::int64_t appPort,
                                  const std::string& versionLabel,
                                  nlohmann::json extraEnv) const;
  // The projected volume of the sidecar's tokens, for a pod of `ns`/`shardMap`.
  static nlohmann::json tokenVolume(const std::string& ns, const std::string& shardMap);

  InjectionConfig config_;
  SpecLookup lookup_;
  Logger log_;
  SecretSource secrets_;
};

// Where the app container's preStop hook goes when the drain takes its place.
struct PreStopPlan {
  nlohmann::json moved;                 // the hook the sidecar runs after the drain; null: none
  bool keepApps = false;                // the app's hook stays (exec): no drain hook is added
  std::optional<std::string> warning;   // for the admission response
};
// `container` is the app container. Pure.
PreStopPlan planPreStop(const nlohmann::json& container);

// The app container's index in the pod's `spec`: the one that declares `appPort`, else the
// first; nothing when the pod has no container. It gets the drain hook. Pure.
std::optional<std::size_t> appContainerIndex(const nlohmann::json& spec, std::int64_t appPort);

// The terminationGracePeriodSeconds a pod needs to drain: the ShardMap's handoffTimeout, the
// configured margin and the longest unregister hold, saturating at INT64_MAX. Pure.
std::int64_t drainGracePeriodSeconds(sharding::Duration handoffTimeout,
                                     const InjectionConfig& config);

// "kshard.io/shard-map" -> "kshard.io~1shard-map" (RFC 6901).
std::string jsonPointerEscape(std::string_view key);

}  // namespace kshard::manager
