#include "operator/config.h"

#include "base/logger.h"
#include "protocol/wire.h"
#include "sharding/duration_option.h"
#include "sharding/shard_id.h"

namespace kshard::manager {

using sharding::durationOption;
using sharding::nonNegativeDuration;
using sharding::positiveDuration;

void OperatorConfig::declare(OptionSet& opts) {
  opts.addAll({
      {"pod-name", "POD_NAME",
       "This replica's pod name (downward API): the Lease holder identity and status.manager.pod.",
       &podName},
      {"pod-namespace", "POD_NAMESPACE",
       "This replica's namespace (downward API); the Lease lives there by default.", &podNamespace},
      {"pod-ip", "POD_IP",
       "This replica's pod IP (downward API); the host of the advertised manager address.", &podIp},
      {"service-account", "POD_SERVICE_ACCOUNT",
       "This replica's ServiceAccount (downward API spec.serviceAccountName), in --pod-namespace: "
       "the operator mints its tokens for the sidecars from it.",
       &serviceAccount},
      {"kubeconfig", "KSHARD_KUBECONFIG",
       "kubeconfig file (default: $KUBECONFIG, then in-cluster, then ~/.kube/config).",
       &kubeconfig},
      {"kube-context", "", "kubeconfig context (default: current-context).", &kubeContext},
      {"kube-qps", "", "Kubernetes API requests per second (client-side limit).",
       DoubleOption{&kubeQps, 1, 10000}},
      {"kube-burst", "", "Kubernetes API request burst above kube-qps.",
       IntOption{&kubeBurst, 1, 100000}},
      {"watch-namespace", "KSHARD_WATCH_NAMESPACE",
       "Only ShardMaps and pods of this namespace (default: every namespace).", &watchNamespace},
      {"manager-listen", "", "host:port of the manager API (register, unregister, ...).",
       &managerListen},
      {"advertise-address", "KSHARD_ADVERTISE_ADDRESS",
       "host:port sidecars use to reach this replica's manager API, written to status.manager "
       "(default: POD_IP and the manager-listen port).",
       &advertiseAddress},
      {"admin-listen", "", "host:port of /metrics, /healthz and /readyz.", &adminListen},
      {"webhook-listen", "", "host:port of the mutating webhook (TLS).", &webhookListen},
      {"webhook-cert-file", "",
       "PEM certificate chain of the webhook; with webhook-key-file, the webhook server is "
       "started.",
       &webhookCertFile},
      {"webhook-key-file", "", "PEM private key of the webhook.", &webhookKeyFile},
      {"injection-config", "KSHARD_INJECTION_CONFIG",
       "YAML file of what the webhook injects (sidecar image, ports, resources); default: built-in "
       "values.",
       &injectionConfigFile},
      {"http-backend", "KSHARD_HTTP_BACKEND",
       "HTTP implementation of the clients to the sidecars: cpprest or beast (the servers are "
       "always beast).",
       &httpBackend},
      {"io-threads", "", "Threads serving each HTTP server.", IntOption{&ioThreads, 1, 64}},
      {"status-inline-bytes", "",
       "A ShardMap status larger than this (as JSON) keeps its pods and assignments in "
       "ShardMapSegment objects instead (etcd stores at most 1.5 MiB an object by default).",
       IntOption{&statusInlineBytes, 1024, 1024 * 1024}},
      {"segment-bytes", "",
       "The most data one ShardMapSegment holds (the CRD takes 768 KiB); a pod's or an "
       "assignment's entry is never cut, and the longest (100,000 shards) is about 400 KB.",
       IntOption{&segmentBytes, 400 * 1024, 768 * 1024}},
      {"lease-name", "", "Name of the leader election Lease.", &leaseName},
      {"lease-namespace", "", "Namespace of the Lease (default: the pod's namespace).",
       &leaseNamespace},
      {"lease-duration", "",
       "How long a Lease is valid without renewal; a new leader waits this long after the last "
       "renewal.",
       positiveDuration(&leaseDuration)},
      {"renew-deadline", "",
       "The leader stops acting if it could not renew within this; shorter than lease-duration.",
       positiveDuration(&renewDeadline)},
      {"retry-period", "", "How often candidates try to acquire and the leader renews the Lease.",
       positiveDuration(&retryPeriod)},
      {"create-shard-maps", "",
       "Create a missing ShardMap when a pod labelled kshard.io/shard-map appears (shards from its "
       "kshard.io/shards annotation, else default-shards).",
       &createShardMaps},
      {"default-shards", "", "Shard count of ShardMaps the operator creates.",
       IntOption{&defaultShards, sharding::kMinShardCount, sharding::kMaxShardCount}},
      {"max-shard-maps-per-namespace", "",
       "The operator creates a missing ShardMap only for a pod the webhook injected, and only "
       "while its namespace holds fewer ShardMaps than this (whoever may create pods may label "
       "them).",
       IntOption{&maxShardMapsPerNamespace, 1, 100000}},
      {"manage-rbac", "",
       "Keep a RoleBinding in every namespace with labelled pods that lets their ServiceAccounts "
       "read and watch ShardMaps.",
       &manageRbac},
      {"sidecar-cluster-role", "", "ClusterRole the RoleBinding grants.", &sidecarClusterRole},
      {"sidecar-role-binding", "", "Name of the RoleBinding the operator keeps.",
       &sidecarRoleBinding},
      {"pod-connect-timeout", "", "Longest time to open a connection to a pod's peer API.",
       positiveDuration(&podConnectTimeout)},
      {"max-unregister-hold", "",
       "Longest time after its delete that a terminating pod keeps its shards (and serves them) "
       "while pods of a newer version start, so that in a rolling update each shard moves once, "
       "straight to a new pod. The injector lengthens the pods' grace period by as much. 0 turns "
       "the hold off.",
       nonNegativeDuration(&maxUnregisterHold)},
      {"pod-auth", "",
       "How the manager API authenticates register, unregister and notify-unhealthy: tokenreview "
       "(the pod's projected service-account token, audience kshard.io/operator, checked with a "
       "TokenReview; a pod registers only itself) or none.",
       &podAuth},
      {"sidecar-auth", "",
       "How the operator proves itself to the sidecars (ping, assign, unassign): tokenrequest (for "
       "each ShardMap a token of its own ServiceAccount whose only audience is "
       "kshard.io/sidecar/<namespace>/<name>, minted with TokenRequest, which only that map's "
       "sidecars take; needs --service-account and --pod-namespace) or none (no token: for "
       "sidecars with --peer-auth=none).",
       &sidecarAuth},
      {"sidecar-token-lifetime", "",
       "Lifetime asked for the tokens minted for the sidecars (at least 10m, TokenRequest's "
       "minimum); each is replaced once half of it has passed.",
       durationOption(&sidecarTokenLifetime, std::chrono::minutes(10), "must be at least 10m")},
      {"seed", "", "Seed of the planner's randomness (0: from the clock).",
       IntOption{&seed, 0, INT64_MAX}},
      {"log-level", "KSHARD_LOG_LEVEL", "debug, info, warn or error.", &logLevel},
  });
}

Status OperatorConfig::finalize() {
  if (podName.empty()) return invalidArgument("--pod-name: required (or env POD_NAME)");
  if (!protocol::isDnsSubdomain(podName)) {
    return invalidArgument("--pod-name: not a valid pod name: " + podName);
  }
  if (podAuth != "tokenreview" && podAuth != "none") {
    return invalidArgument("--pod-auth: must be tokenreview or none, got \"" + podAuth + "\"");
  }
  if (sidecarAuth != "tokenrequest" && sidecarAuth != "none") {
    return invalidArgument("--sidecar-auth: must be tokenrequest or none, got \"" + sidecarAuth +
                           "\"");
  }
  if (sidecarAuth == "tokenrequest" &&
      (!protocol::isDnsSubdomain(serviceAccount) || !protocol::isDnsLabel(podNamespace))) {
    return invalidArgument(
        "--service-account and --pod-namespace (env POD_SERVICE_ACCOUNT, POD_NAMESPACE): required "
        "with --sidecar-auth=tokenrequest (the default), which mints the operator's tokens for the "
        "sidecars from its own ServiceAccount; got \"" +
        serviceAccount + "\" in \"" + podNamespace +
        "\". --sidecar-auth=none sends none, for sidecars with --peer-auth=none");
  }
  if (leaseNamespace.empty()) leaseNamespace = podNamespace;
  if (leaseNamespace.empty()) {
    return invalidArgument("--lease-namespace: required when POD_NAMESPACE is not set");
  }
  if (!protocol::isDnsLabel(leaseNamespace)) {
    return invalidArgument("--lease-namespace: not a valid namespace: " + leaseNamespace);
  }
  if (!watchNamespace.empty() && !protocol::isDnsLabel(watchNamespace)) {
    return invalidArgument("--watch-namespace: not a valid namespace: " + watchNamespace);
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"manager-listen", &managerListen},
        {"admin-listen", &adminListen},
        {"webhook-listen", &webhookListen}}) {
    if (auto hp = splitHostPort(*value); !hp.ok()) {
      return hp.status().withContext(std::string("--") + flag);
    }
  }
  if (advertiseAddress.empty()) {
    if (podIp.empty()) {
      return invalidArgument("--advertise-address: required when POD_IP is not set");
    }
    const auto port = splitHostPort(managerListen)->second;
    const bool v6 = podIp.find(':') != std::string::npos;
    advertiseAddress = (v6 ? "[" + podIp + "]" : podIp) + ":" + std::to_string(port);
  }
  if (auto hp = splitHostPort(advertiseAddress); !hp.ok()) {
    return hp.status().withContext("--advertise-address");
  }
  if (!(renewDeadline < leaseDuration)) {
    return invalidArgument("--renew-deadline: must be shorter than --lease-duration");
  }
  if (!(retryPeriod < renewDeadline)) {
    return invalidArgument("--retry-period: must be shorter than --renew-deadline");
  }
  if (webhookCertFile.empty() != webhookKeyFile.empty()) {
    return invalidArgument("--webhook-cert-file and --webhook-key-file: give both or neither");
  }
  if (httpBackend != "cpprest" && httpBackend != "beast") {
    return invalidArgument("--http-backend: must be cpprest or beast");
  }
  LogLevel level;
  if (!parseLogLevel(logLevel, level)) {
    return invalidArgument("--log-level: must be debug, info, warn or error");
  }
  return {};
}

StatusOr<std::pair<std::string, std::uint16_t>> splitHostPort(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) {
    return invalidArgument("must be host:port, got \"" + text + "\"");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return invalidArgument("port must be 1..65535, got \"" + port + "\"");
  }
  const int p = std::stoi(port);
  if (p < 1 || p > 65535) return invalidArgument("port must be 1..65535, got \"" + port + "\"");
  if (host.empty()) host = "0.0.0.0";
  return std::pair<std::string, std::uint16_t>{host, static_cast<std::uint16_t>(p)};
}

}  // namespace kshard::manager
