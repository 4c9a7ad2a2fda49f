#include "operator/config.h"

#include "base/logger.h"
#include "protocol/wire.h"
#include "sharding/duration.h"
#include "sharding/shard_id.h"

namespace kshard::manager {
namespace {

// A Go duration ("15s", "1m30s"); greater than zero unless `zeroAllowed` (zero turns a feature
// off). The operator's other durations are timeouts or periods.
void addDuration(OptionSet& opts, std::string name, std::string env, std::string help,
                 Duration* target, bool zeroAllowed) {
  opts.add(std::move(name), std::move(env), std::move(help), sharding::formatDuration(*target),
           [target, zeroAllowed](std::string_view v) {
             auto d = sharding::parseDuration(v);
             if (!d.ok()) return d.status();
             if (*d < Duration::zero() || (*d == Duration::zero() && !zeroAllowed)) {
               return invalidArgument(zeroAllowed ? "must not be negative"
                                                  : "must be greater than zero");
             }
             *target = *d;
             return Status{};
           });
}

void addPositiveDuration(OptionSet& opts, std::string name, std::string env, std::string help,
                         Duration* target) {
  addDuration(opts, std::move(name), std::move(env), std::move(help), target, false);
}

}  // namespace

void OperatorConfig::declare(OptionSet& opts) {
  opts.addString("pod-name", "POD_NAME",
                 "This replica's pod name (downward API): the Lease holder identity and "
                 "status.manager.pod.",
                 &podName);
  opts.addString("pod-namespace", "POD_NAMESPACE",
                 "This replica's namespace (downward API); the Lease lives there by default.",
                 &podNamespace);
  opts.addString("pod-ip", "POD_IP",
                 "This replica's pod IP (downward API); the host of the advertised manager "
                 "address.",
                 &podIp);
  opts.addString("service-account", "POD_SERVICE_ACCOUNT",
                 "This replica's ServiceAccount (downward API spec.serviceAccountName), in "
                 "--pod-namespace: the operator mints its tokens for the sidecars from it.",
                 &serviceAccount);
  opts.addString("kubeconfig", "KSHARD_KUBECONFIG",
                 "kubeconfig file (default: $KUBECONFIG, then in-cluster, then ~/.kube/config).",
                 &kubeconfig);
  opts.addString("kube-context", "", "kubeconfig context (default: current-context).",
                 &kubeContext);
  opts.addDouble("kube-qps", "", "Kubernetes API requests per second (client-side limit).",
                 &kubeQps, 1, 10000);
  opts.addInt("kube-burst", "", "Kubernetes API request burst above kube-qps.", &kubeBurst, 1,
              100000);
  opts.addString("watch-namespace", "KSHARD_WATCH_NAMESPACE",
                 "Only ShardMaps and pods of this namespace (default: every namespace).",
                 &watchNamespace);
  opts.addString("manager-listen", "", "host:port of the manager API (register, unregister, ...).",
                 &managerListen);
  opts.addString("advertise-address", "KSHARD_ADVERTISE_ADDRESS",
                 "host:port sidecars use to reach this replica's manager API, written to "
                 "status.manager (default: POD_IP and the manager-listen port).",
                 &advertiseAddress);
  opts.addString("admin-listen", "", "host:port of /metrics, /healthz and /readyz.", &adminListen);
  opts.addString("webhook-listen", "", "host:port of the mutating webhook (TLS).", &webhookListen);
  opts.addString("webhook-cert-file", "",
                 "PEM certificate chain of the webhook; with webhook-key-file, the webhook server "
                 "is started.",
                 &webhookCertFile);
  opts.addString("webhook-key-file", "", "PEM private key of the webhook.", &webhookKeyFile);
  opts.addString("injection-config", "KSHARD_INJECTION_CONFIG",
                 "YAML file of what the webhook injects (sidecar image, ports, resources); "
                 "default: built-in values.",
                 &injectionConfigFile);
  opts.addString("http-backend", "KSHARD_HTTP_BACKEND",
                 "HTTP implementation of the clients to the sidecars: cpprest or beast (the "
                 "servers are always beast).",
                 &httpBackend);
  opts.addInt("io-threads", "", "Threads serving each HTTP server.", &ioThreads, 1, 64);
  opts.addString("lease-name", "", "Name of the leader election Lease.", &leaseName);
  opts.addString("lease-namespace", "", "Namespace of the Lease (default: the pod's namespace).",
                 &leaseNamespace);
  addPositiveDuration(opts, "lease-duration", "",
                      "How long a Lease is valid without renewal; a new leader waits this long "
                      "after the last renewal.",
                      &leaseDuration);
  addPositiveDuration(opts, "renew-deadline", "",
                      "The leader stops acting if it could not renew within this; shorter than "
                      "lease-duration.",
                      &renewDeadline);
  addPositiveDuration(opts, "retry-period", "",
                      "How often candidates try to acquire and the leader renews the Lease.",
                      &retryPeriod);
  opts.addBool("create-shard-maps", "",
               "Create a missing ShardMap when a pod labelled kshard.io/shard-map appears "
               "(shards from its kshard.io/shards annotation, else default-shards).",
               &createShardMaps);
  opts.addInt("default-shards", "", "Shard count of ShardMaps the operator creates.",
              &defaultShards, sharding::kMinShardCount, sharding::kMaxShardCount);
  opts.addInt("max-shard-maps-per-namespace", "",
              "The operator creates a missing ShardMap only for a pod the webhook injected, and "
              "only while its namespace holds fewer ShardMaps than this (whoever may create pods "
              "may label them).",
              &maxShardMapsPerNamespace, 1, 100000);
  opts.addBool("manage-rbac", "",
               "Keep a RoleBinding in every namespace with labelled pods that lets their "
               "ServiceAccounts read and watch ShardMaps.",
               &manageRbac);
  opts.addString("sidecar-cluster-role", "", "ClusterRole the RoleBinding grants.",
                 &sidecarClusterRole);
  opts.addString("sidecar-role-binding", "", "Name of the RoleBinding the operator keeps.",
                 &sidecarRoleBinding);
  addPositiveDuration(opts, "pod-connect-timeout", "",
                      "Longest time to open a connection to a pod's peer API.", &podConnectTimeout);
  addDuration(opts, "max-unregister-hold", "",
              "Longest time after its delete that a terminating pod keeps its shards (and serves "
              "them) while pods of a newer version start, so that in a rolling update each shard "
              "moves once, straight to a new pod. The injector lengthens the pods' grace period "
              "by as much. 0 turns the hold off.",
              &maxUnregisterHold, true);
  opts.addString("pod-auth", "",
                 "How the manager API authenticates register, unregister and notify-unhealthy: "
                 "tokenreview (the pod's projected service-account token, audience "
                 "kshard.io/operator, checked with a TokenReview; a pod registers only itself) or "
                 "none.",
                 &podAuth);
  opts.addString("sidecar-auth", "",
                 "How the operator proves itself to the sidecars (ping, assign, unassign): "
                 "tokenrequest (for each ShardMap a token of its own ServiceAccount whose only "
                 "audience is kshard.io/sidecar/<namespace>/<name>, minted with TokenRequest, "
                 "which only that map's sidecars take; needs --service-account and "
                 "--pod-namespace) or none (no token: for sidecars with --peer-auth=none).",
                 &sidecarAuth);
  opts.add("sidecar-token-lifetime", "",
           "Lifetime asked for the tokens minted for the sidecars (at least 10m, TokenRequest's "
           "minimum); each is replaced once half of it has passed.",
           sharding::formatDuration(sidecarTokenLifetime), [this](std::string_view v) {
             auto d = sharding::parseDuration(v);
             if (!d.ok()) return d.status();
             if (*d < std::chrono::minutes(10)) return invalidArgument("must be at least 10m");
             sidecarTokenLifetime = *d;
             return Status{};
           });
  opts.addInt("seed", "", "Seed of the planner's randomness (0: from the clock).", &seed, 0,
              INT64_MAX);
  opts.addString("log-level", "KSHARD_LOG_LEVEL", "debug, info, warn or error.", &logLevel);
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
