// InjectionConfig: what the webhook injects into annotated pods (the sidecar's image, resources,
// ports, limits), read from the YAML file the chart renders (--injection-config). Each pod's own
// values (ShardMap, app port, version label, grace period) come from the pod and its ShardMap.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "protocol/wire.h"

namespace kshard::manager {

struct InjectionConfig {
  std::string image = "kshard/sidecar:dev";
  std::string imagePullPolicy = "IfNotPresent";
  std::string logLevel = "info";
  std::int64_t apiPort = 7100;
  std::int64_t peerPort = 7101;
  std::int64_t adminPort = 7102;
  std::int64_t maxBodyBytes = 4 << 20;
  // The sidecar's --max-concurrent-stops, --max-pending-tells and --max-pending-tell-bytes.
  std::int64_t maxConcurrentStops = protocol::kMaxConcurrentStops.defaultValue;
  std::int64_t maxPendingTells = protocol::kMaxPendingTells.defaultValue;
  std::int64_t maxPendingTellBytes = protocol::kMaxPendingTellBytes.defaultValue;
  std::int64_t gracePeriodMarginSeconds = 15;
  // Not read from the file: the operator's --max-unregister-hold, in seconds. The grace period
  // covers it, so that a held pod still has its handoff's time before the kubelet kills it.
  std::int64_t unregisterHoldSeconds = 0;
  nlohmann::json resources = nlohmann::json::object();  // a core/v1 ResourceRequirements
  // Inject as a native sidecar (an init container with restartPolicy Always, Kubernetes >= 1.29):
  // it starts before the app and stops after it. Otherwise a regular container.
  bool nativeSidecar = true;
  // The sidecar's --peer-auth: "token" (only the operator may ping/assign/unassign, only pods of
  // the same ShardMap may forward; each proven by a token for that map) or "none".
  std::string peerAuth = "token";
  // With peerAuth token: the operator's token subject, "system:serviceaccount:<ns>:<name>";
  // empty: this operator's own (filled in from --pod-namespace and --service-account).
  std::string operatorIdentity;
};

// Parses the YAML text; InvalidArgument naming the field ("peerPort: must be 1..65535").
[[nodiscard]] StatusOr<InjectionConfig> parseInjectionConfig(const std::string& yamlText);
// Reads and parses a file; the error names the path.
[[nodiscard]] StatusOr<InjectionConfig> loadInjectionConfig(const std::string& path);

}  // namespace kshard::manager
