// OperatorConfig: kshard-operator's settings. Declared once on a base/options.h OptionSet, so the
// flags, the environment, the YAML file (--config, option names as keys) and `--help` agree;
// docs/operator.md lists the same options.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/options.h"
#include "base/status.h"

namespace kshard::manager {

struct OperatorConfig {
  // Identity (downward API).
  std::string podName;       // POD_NAME: the Lease holder identity and status.manager.pod
  std::string podNamespace;  // POD_NAMESPACE: where the Lease lives by default
  std::string podIp;         // POD_IP: the host of the advertised manager address
  // POD_SERVICE_ACCOUNT: the operator's own ServiceAccount, which mints its tokens for the
  // sidecars (TokenRequest).
  std::string serviceAccount;

  // Kubernetes API.
  std::string kubeconfig;
  std::string kubeContext;
  double kubeQps = 50;
  std::int64_t kubeBurst = 100;
  std::string watchNamespace;  // empty: every namespace

  // Servers.
  std::string managerListen = "0.0.0.0:7200";
  std::string advertiseAddress;  // default: POD_IP and the manager port
  std::string adminListen = "0.0.0.0:7202";
  std::string webhookListen = "0.0.0.0:9443";
  std::string webhookCertFile;  // with the key: serve the mutating webhook (TLS)
  std::string webhookKeyFile;
  std::string injectionConfigFile;  // what the webhook injects (YAML); empty: built-in defaults
  std::string httpBackend = "cpprest";
  std::int64_t ioThreads = 2;
  // A ShardMap status larger than this (as JSON) is stored in ShardMapSegments of at most
  // segmentBytes each (decision 0018).
  std::int64_t statusInlineBytes = 512 * 1024;
  std::int64_t segmentBytes = 512 * 1024;

  // Leader election (client-go's defaults).
  std::string leaseName = "kshard-operator";
  std::string leaseNamespace;  // default: POD_NAMESPACE
  Duration leaseDuration = std::chrono::seconds(15);
  Duration renewDeadline = std::chrono::seconds(10);
  Duration retryPeriod = std::chrono::seconds(2);

  // Behaviour.
  bool createShardMaps = true;
  std::int64_t defaultShards = 300;
  std::int64_t maxShardMapsPerNamespace = 20;
  bool manageRbac = true;
  std::string sidecarClusterRole = "kshard-sidecar";
  std::string sidecarRoleBinding = "kshard-sidecar";
  Duration podConnectTimeout = std::chrono::seconds(2);
  // How long a terminating pod's unregister may be held while newer pods start
  // (operator/unregister_hold.h); zero: never.
  Duration maxUnregisterHold = std::chrono::seconds(60);
  // How callers of register, unregister and notify-unhealthy are authenticated: "tokenreview"
  // (their pod's projected token, checked with a TokenReview) or "none".
  std::string podAuth = "tokenreview";
  // How the operator proves itself to the sidecars' peer API (ping, assign, unassign):
  // "tokenrequest" (a token of its ServiceAccount per ShardMap, whose only audience names that
  // map's sidecars, minted with TokenRequest) or "none" (for sidecars with --peer-auth=none).
  std::string sidecarAuth = "tokenrequest";
  // The lifetime those tokens are asked for (at least 10 minutes); each is replaced half way.
  Duration sidecarTokenLifetime = std::chrono::minutes(20);
  std::int64_t seed = 0;  // planner randomness; 0 = from the clock

  std::string logLevel = "info";

  // Declares every option on `opts`, with this object's values as the defaults.
  void declare(OptionSet& opts);
  // Cross-field checks and derived defaults (advertise address, lease namespace); InvalidArgument
  // naming the option.
  [[nodiscard]] Status finalize();
};

// "host:port" split; InvalidArgument unless the port is 1..65535.
[[nodiscard]] StatusOr<std::pair<std::string, std::uint16_t>> splitHostPort(
    const std::string& text);

}  // namespace kshard::manager
