#include "sidecar/config.h"

#include <random>

#include "base/utf8.h"
#include "protocol/wire.h"
#include "sharding/duration.h"

namespace kshard::sidecar {
namespace {

void addDuration(OptionSet& opts, std::string name, std::string env, std::string help,
                 Duration* target) {
  opts.add(std::move(name), std::move(env), std::move(help), sharding::formatDuration(*target),
           [target](std::string_view v) {
             auto d = sharding::parseDuration(v);
             if (!d.ok()) return d.status();
             if (*d < Duration::zero()) return invalidArgument("must not be negative");
             *target = *d;
             return Status{};
           });
}

}  // namespace

void SidecarConfig::declare(OptionSet& opts) {
  opts.addString("pod-name", "POD_NAME", "This pod's name (downward API).", &podName);
  opts.addString("pod-namespace", "POD_NAMESPACE", "This pod's namespace (downward API).",
                 &podNamespace);
  opts.addString("pod-uid", "POD_UID", "This pod's uid (downward API).", &podUid);
  opts.addString("pod-ip", "POD_IP", "This pod's IP (downward API).", &podIp);
  opts.addString("host-ip", "HOST_IP",
                 "The node's IP (downward API); the kubelet calls GET /v1/drain from there.",
                 &hostIp);
  opts.addString("shard-map", "KSHARD_SHARD_MAP", "The ShardMap this pod belongs to.", &shardMap);
  opts.addString("version", "KSHARD_VERSION",
                 "This pod's version (its version label); newer pods get shards first.", &version);
  opts.addInt("app-port", "KSHARD_APP_PORT", "Port of the app's entity callbacks on 127.0.0.1.",
              &appPort, 1, 65535);
  opts.addInt("api-port", "KSHARD_API_PORT", "Port of the app API on 127.0.0.1.", &apiPort, 1,
              65535);
  opts.addInt("peer-port", "KSHARD_PEER_PORT", "Port of the peer API on the pod IP.", &peerPort, 1,
              65535);
  opts.addInt("admin-port", "KSHARD_ADMIN_PORT", "Port of /metrics, /healthz and /readyz.",
              &adminPort, 1, 65535);
  opts.addString("peer-bind-address", "KSHARD_PEER_BIND_ADDRESS",
                 "Address the peer API listens on (default: the pod IP).", &peerBindAddress);
  opts.addString("admin-bind-address", "KSHARD_ADMIN_BIND_ADDRESS",
                 "Address the admin endpoints listen on.", &adminBindAddress);
  opts.addInt("max-body-bytes", "KSHARD_MAX_BODY_BYTES",
              "Largest message body accepted (413 above).", &maxBodyBytes, 1024, 1 << 30);
  opts.addInt("max-id-bytes", "KSHARD_MAX_ID_BYTES", "Longest entity id accepted (400 above).",
              &maxIdBytes, 1, 1 << 20);
  addDuration(opts, "app-timeout", "KSHARD_APP_TIMEOUT", "Longest one message may take at the app.",
              &appTimeout);
  addDuration(opts, "stop-timeout", "KSHARD_STOP_TIMEOUT",
              "Longest one entity stop callback may take.", &stopTimeout);
  opts.addInt("max-concurrent-stops", "KSHARD_MAX_CONCURRENT_STOPS",
              "Entity stop callbacks at the app at once (a drain or a handoff of many entities "
              "queues the rest, handoffs before idle passivations).",
              &maxConcurrentStops, protocol::kMaxConcurrentStops.min,
              protocol::kMaxConcurrentStops.max);
  opts.addInt("max-pending-tells", "KSHARD_MAX_PENDING_TELLS",
              "Tell messages accepted and not yet answered by the app, across all entities; "
              "beyond it a tell is answered 503 EntityOverloaded.",
              &maxPendingTells, protocol::kMaxPendingTells.min, protocol::kMaxPendingTells.max);
  opts.addInt("max-pending-tell-bytes", "KSHARD_MAX_PENDING_TELL_BYTES",
              "Bytes of the bodies of those tells; beyond it a tell is answered 503 "
              "EntityOverloaded (one is always accepted when none waits).",
              &maxPendingTellBytes, protocol::kMaxPendingTellBytes.min,
              protocol::kMaxPendingTellBytes.max);
  addDuration(opts, "app-wait-timeout", "KSHARD_APP_WAIT_TIMEOUT",
              "How long to wait at start-up for the app to listen before giving up.",
              &appWaitTimeout);
  addDuration(opts, "reset-timeout", "KSHARD_RESET_TIMEOUT",
              "Longest the app's reset callback (POST /kshard/reset, sent at start-up before the "
              "pod registers: stop and save every entity) may take; it is asked again until it "
              "answers 2xx.",
              &resetTimeout);
  addDuration(opts, "drain-linger", "KSHARD_DRAIN_LINGER",
              "How long a drained sidecar whose pod is not being deleted (a drain asked by hand, "
              "the app restarting alone) waits before it registers and serves again.",
              &drainLinger);
  opts.addString("drain-token", "KSHARD_DRAIN_TOKEN",
                 "A secret the drain on the admin port requires in the Kshard-Drain-Token header "
                 "(the injector sets it, and puts it in the preStop hook); empty: none required.",
                 &drainToken);
  opts.addString("app-prestop", "KSHARD_APP_PRESTOP",
                 "The app container's own preStop hook (JSON, set by the injector), run after "
                 "the drain that replaces it.",
                 &appPreStop);
  opts.addInt("io-threads", "KSHARD_IO_THREADS",
              "I/O threads of the data path, shared by the app and peer APIs and the clients to "
              "the app and the peers (with http-backend=beast).",
              &ioThreads, 1, 64);
  opts.addString("io-model", "KSHARD_IO_MODEL",
                 "thread (one event loop per I/O thread: a message is received, forwarded and "
                 "answered on one thread) or shared (one event loop that every I/O thread runs).",
                 &ioModel);
  opts.addString("peer-transport", "KSHARD_PEER_TRANSPORT",
                 "How messages are forwarded to other sidecars: channel (many on one connection "
                 "per I/O thread, in frames; a peer that does not speak it gets plain HTTP) or "
                 "http (a request per message on pooled connections; with http-backend=beast).",
                 &peerTransport);
  opts.addString("map-source", "KSHARD_MAP_SOURCE",
                 "Where the ShardMap comes from: kube (watch it) or manager (poll the operator).",
                 &mapSource);
  opts.addString("manager-address", "KSHARD_MANAGER_ADDRESS",
                 "host:port of the operator's manager API, instead of status.manager.",
                 &managerAddress);
  opts.addString("manager-token-file", "KSHARD_MANAGER_TOKEN_FILE",
                 "File holding this pod's projected service-account token for the manager API "
                 "(audience kshard.io/operator), sent as a bearer token on register, unregister, "
                 "renew, notify-unhealthy and the map poll; re-read every minute (the kubelet "
                 "rotates it). Empty: no token is sent.",
                 &managerTokenFile);
  opts.addString("peer-token-file", "KSHARD_PEER_TOKEN_FILE",
                 "File holding this pod's projected service-account token for the other sidecars "
                 "of its ShardMap (audience kshard.io/peer/<namespace>/<shard-map>), sent with "
                 "forwarded messages; re-read every minute. Empty: no token is sent.",
                 &peerTokenFile);
  opts.addString("peer-auth", "KSHARD_PEER_AUTH",
                 "How the peer API checks its callers: token (the default: ping, assign and "
                 "unassign only from the operator's ServiceAccount with a token for this "
                 "ShardMap's sidecars, forwarded messages only from registered pods of this "
                 "ShardMap with their peer tokens; verified against the cluster's service-account "
                 "issuer keys; needs --operator-identity, --peer-token-file, and map-source=kube "
                 "or --issuer-keys-file) or none (every caller is accepted: only where the pod "
                 "network is secured otherwise, and for tests).",
                 &peerAuth);
  opts.addString("operator-identity", "KSHARD_OPERATOR_IDENTITY",
                 "With peer-auth=token, the token subject of the operator "
                 "(system:serviceaccount:<namespace>:<name>).",
                 &operatorIdentity);
  opts.addString("issuer-keys-file", "KSHARD_ISSUER_KEYS_FILE",
                 "With peer-auth=token, read the service-account issuer's keys from this JWKS "
                 "file (read once) instead of the API server's /openid/v1/jwks; needs --issuer.",
                 &issuerKeysFile);
  opts.addString("issuer", "KSHARD_ISSUER",
                 "With --issuer-keys-file, the iss that tokens must carry.", &issuer);
  addDuration(opts, "map-poll-interval", "KSHARD_MAP_POLL_INTERVAL",
              "With map-source=manager, how often to fetch the map.", &mapPollInterval);
  opts.addString("kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG).",
                 &kubeconfig);
  opts.addString("log-level", "KSHARD_LOG_LEVEL", "debug, info, warn or error.", &logLevel);
  opts.addString("http-backend", "KSHARD_HTTP_BACKEND", "beast or cpprest.", &httpBackend);
}

Status SidecarConfig::validate() const {
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"pod-name", &podName},
        {"pod-namespace", &podNamespace},
        {"pod-uid", &podUid},
        {"pod-ip", &podIp},
        {"shard-map", &shardMap}}) {
    if (value->empty()) return invalidArgument("--" + std::string(name) + ": required");
  }
  // The identity travels in JSON (register, ping), which cannot carry anything but UTF-8.
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"pod-name", &podName},
        {"pod-uid", &podUid},
        {"pod-ip", &podIp},
        {"version", &version}}) {
    if (!validateUtf8(*value).ok()) {
      return invalidArgument("--" + std::string(name) + ": must be valid UTF-8");
    }
  }
  if (!protocol::isDnsLabel(podNamespace)) {
    return invalidArgument("--pod-namespace: not a valid namespace name");
  }
  if (!protocol::isDnsSubdomain(shardMap)) {
    return invalidArgument("--shard-map: not a valid object name");
  }
  if (mapSource != "kube" && mapSource != "manager") {
    return invalidArgument("--map-source: must be kube or manager");
  }
  if (mapSource == "manager" && managerAddress.empty()) {
    return invalidArgument("--manager-address: required with --map-source=manager");
  }
  if (peerAuth != "token" && peerAuth != "none") {
    return invalidArgument("--peer-auth: must be token or none");
  }
  if (peerAuth == "token") {
    // The default: say what is missing, and how to turn it off on purpose.
    const std::string why =
        " with --peer-auth=token (the default; --peer-auth=none accepts every caller of the peer "
        "API, for tests and pod networks secured otherwise)";
    if (mapSource != "kube" && issuerKeysFile.empty()) {
      return invalidArgument(
          "--issuer-keys-file: required with --map-source=manager" + why +
          ": the issuer keys come from the API server only with --map-source=kube");
    }
    if (!issuerKeysFile.empty() && issuer.empty()) {
      return invalidArgument("--issuer: required with --issuer-keys-file");
    }
    if (!protocol::isServiceAccountSubject(operatorIdentity)) {
      return invalidArgument(
          "--operator-identity: must be system:serviceaccount:<namespace>:<name>" + why +
          ", got \"" + operatorIdentity + "\"");
    }
    if (peerTokenFile.empty()) {
      return invalidArgument("--peer-token-file: required" + why +
                             ": the other sidecars check this pod's peer token");
    }
  }
  LogLevel l;
  if (!parseLogLevel(logLevel, l))
    return invalidArgument("--log-level: must be debug, info, warn or error");
  if (httpBackend != "beast" && httpBackend != "cpprest") {
    return invalidArgument("--http-backend: must be beast or cpprest");
  }
  if (ioModel != "thread" && ioModel != "shared") {
    return invalidArgument("--io-model: must be thread or shared");
  }
  if (peerTransport != "channel" && peerTransport != "http") {
    return invalidArgument("--peer-transport: must be channel or http");
  }
  return {};
}

std::string newIncarnation() {
  std::random_device device;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  // 64 bits: enough that two processes of one pod never draw the same, short enough that the
  // status of a thousand pods stays small.
  for (int i = 0; i < 2; ++i) {
    const std::uint32_t word = device();
    for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(word >> shift) & 0xf]);
  }
  return out;
}

Identity SidecarConfig::identity() const {
  Identity id;
  id.pod = podName;
  id.uid = podUid;
  id.podIp = podIp;
  id.version = version;
  id.shardMap = {podNamespace, shardMap};
  // IPv6 addresses need brackets in host:port.
  const bool v6 = podIp.find(':') != std::string::npos;
  id.peerAddress = (v6 ? "[" + podIp + "]" : podIp) + ":" + std::to_string(peerPort);
  return id;
}

}  // namespace kshard::sidecar
