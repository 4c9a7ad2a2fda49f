#include "sidecar/config.h"

#include <random>

#include "base/utf8.h"
#include "protocol/wire.h"
#include "sharding/duration_option.h"

namespace kshard::sidecar {

using sharding::nonNegativeDuration;

namespace {

// One of the limits the injector passes on: within the range both sides accept.
IntOption limitOption(std::int64_t* target, const protocol::IntSetting& limit) {
  return {target, limit.min, limit.max};
}

}  // namespace

void SidecarConfig::declare(OptionSet& opts) {
  opts.addAll({
      {"pod-name", "POD_NAME", "This pod's name (downward API).", &podName},
      {"pod-namespace", "POD_NAMESPACE", "This pod's namespace (downward API).", &podNamespace},
      {"pod-uid", "POD_UID", "This pod's uid (downward API).", &podUid},
      {"pod-ip", "POD_IP", "This pod's IP (downward API).", &podIp},
      {"host-ip", "HOST_IP",
       "The node's IP (downward API); the kubelet calls GET /v1/drain from there.", &hostIp},
      {"shard-map", "KSHARD_SHARD_MAP", "The ShardMap this pod belongs to.", &shardMap},
      {"version", "KSHARD_VERSION",
       "This pod's version (its version label); newer pods get shards first.", &version},
      {"app-port", "KSHARD_APP_PORT", "Port of the app's entity callbacks on 127.0.0.1.",
       portOption(&appPort)},
      {"api-port", "KSHARD_API_PORT", "Port of the app API on 127.0.0.1.", portOption(&apiPort)},
      {"peer-port", "KSHARD_PEER_PORT", "Port of the peer API on the pod IP.",
       portOption(&peerPort)},
      {"admin-port", "KSHARD_ADMIN_PORT", "Port of /metrics, /healthz and /readyz.",
       portOption(&adminPort)},
      {"peer-bind-address", "KSHARD_PEER_BIND_ADDRESS",
       "Address the peer API listens on (default: the pod IP).", &peerBindAddress},
      {"admin-bind-address", "KSHARD_ADMIN_BIND_ADDRESS", "Address the admin endpoints listen on.",
       &adminBindAddress},
      {"max-body-bytes", "KSHARD_MAX_BODY_BYTES", "Largest message body accepted (413 above).",
       IntOption{&maxBodyBytes, 1024, 1 << 30}},
      {"max-id-bytes", "KSHARD_MAX_ID_BYTES", "Longest entity id accepted (400 above).",
       IntOption{&maxIdBytes, 1, 1 << 20}},
      {"app-timeout", "KSHARD_APP_TIMEOUT", "Longest one message may take at the app.",
       nonNegativeDuration(&appTimeout)},
      {"stop-timeout", "KSHARD_STOP_TIMEOUT", "Longest one entity stop callback may take.",
       nonNegativeDuration(&stopTimeout)},
      {"max-concurrent-stops", "KSHARD_MAX_CONCURRENT_STOPS",
       "Entity stop callbacks at the app at once (a drain or a handoff of many entities queues the "
       "rest, handoffs before idle passivations).",
       limitOption(&maxConcurrentStops, protocol::kMaxConcurrentStops)},
      {"max-pending-tells", "KSHARD_MAX_PENDING_TELLS",
       "Tell messages accepted and not yet answered by the app, across all entities; beyond it a "
       "tell is answered 503 EntityOverloaded.",
       limitOption(&maxPendingTells, protocol::kMaxPendingTells)},
      {"max-pending-tell-bytes", "KSHARD_MAX_PENDING_TELL_BYTES",
       "Bytes of the bodies of those tells; beyond it a tell is answered 503 EntityOverloaded (one "
       "is always accepted when none waits).",
       limitOption(&maxPendingTellBytes, protocol::kMaxPendingTellBytes)},
      {"app-wait-timeout", "KSHARD_APP_WAIT_TIMEOUT",
       "How long to wait at start-up for the app to listen before giving up.",
       nonNegativeDuration(&appWaitTimeout)},
      {"reset-timeout", "KSHARD_RESET_TIMEOUT",
       "Longest the app's reset callback (POST /kshard/reset, sent at start-up before the pod "
       "registers: stop and save every entity) may take; it is asked again until it answers 2xx.",
       nonNegativeDuration(&resetTimeout)},
      {"drain-linger", "KSHARD_DRAIN_LINGER",
       "How long a drained sidecar whose pod is not being deleted (a drain asked by hand, the app "
       "restarting alone) waits before it registers and serves again.",
       nonNegativeDuration(&drainLinger)},
      {"drain-token", "KSHARD_DRAIN_TOKEN",
       "A secret the drain on the admin port requires in the Kshard-Drain-Token header (the "
       "injector sets it, and puts it in the preStop hook); empty: none required.",
       &drainToken},
      {"app-prestop", "KSHARD_APP_PRESTOP",
       "The app container's own preStop hook (JSON, set by the injector), run after the drain that "
       "replaces it.",
       &appPreStop},
      {"io-threads", "KSHARD_IO_THREADS",
       "I/O threads of the data path, shared by the app and peer APIs and the clients to the app "
       "and the peers (with http-backend=beast).",
       IntOption{&ioThreads, 1, 64}},
      {"io-model", "KSHARD_IO_MODEL",
       "thread (one event loop per I/O thread: a message is received, forwarded and answered on "
       "one thread) or shared (one event loop that every I/O thread runs).",
       &ioModel},
      {"peer-transport", "KSHARD_PEER_TRANSPORT",
       "How messages are forwarded to other sidecars: channel (many on one connection per I/O "
       "thread, in frames; a peer that does not speak it gets plain HTTP) or http (a request per "
       "message on pooled connections; with http-backend=beast).",
       &peerTransport},
      {"map-source", "KSHARD_MAP_SOURCE",
       "Where the ShardMap comes from: kube (watch it) or manager (poll the operator).",
       &mapSource},
      {"manager-address", "KSHARD_MANAGER_ADDRESS",
       "host:port of the operator's manager API, instead of status.manager.", &managerAddress},
      {"manager-token-file", "KSHARD_MANAGER_TOKEN_FILE",
       "File holding this pod's projected service-account token for the manager API (audience "
       "kshard.io/operator), sent as a bearer token on register, unregister, renew, "
       "notify-unhealthy and the map poll; re-read every minute (the kubelet rotates it). Empty: "
       "no token is sent.",
       &managerTokenFile},
      {"peer-token-file", "KSHARD_PEER_TOKEN_FILE",
       "File holding this pod's projected service-account token for the other sidecars of its "
       "ShardMap (audience kshard.io/peer/<namespace>/<shard-map>), sent with forwarded messages; "
       "re-read every minute. Empty: no token is sent.",
       &peerTokenFile},
      {"peer-auth", "KSHARD_PEER_AUTH",
       "How the peer API checks its callers: token (the default: ping, assign and unassign only "
       "from the operator's ServiceAccount with a token for this ShardMap's sidecars, forwarded "
       "messages only from registered pods of this ShardMap with their peer tokens; verified "
       "against the cluster's service-account issuer keys; needs --operator-identity, "
       "--peer-token-file, and map-source=kube or --issuer-keys-file) or none (every caller is "
       "accepted: only where the pod network is secured otherwise, and for tests).",
       &peerAuth},
      {"operator-identity", "KSHARD_OPERATOR_IDENTITY",
       "With peer-auth=token, the token subject of the operator "
       "(system:serviceaccount:<namespace>:<name>).",
       &operatorIdentity},
      {"issuer-keys-file", "KSHARD_ISSUER_KEYS_FILE",
       "With peer-auth=token, read the service-account issuer's keys from this JWKS file (read "
       "once) instead of the API server's /openid/v1/jwks; needs --issuer.",
       &issuerKeysFile},
      {"issuer", "KSHARD_ISSUER", "With --issuer-keys-file, the iss that tokens must carry.",
       &issuer},
      {"map-poll-interval", "KSHARD_MAP_POLL_INTERVAL",
       "With map-source=manager, how often to fetch the map.",
       nonNegativeDuration(&mapPollInterval)},
      {"kubeconfig", "",
       "kubeconfig file (default: in-cluster, then $KUBECONFIG). With map-source=manager, "
       "setting it gives the sidecar the API server for remembered entities' records.",
       &kubeconfig},
      {"log-level", "KSHARD_LOG_LEVEL", "debug, info, warn or error.", &logLevel},
      {"http-backend", "KSHARD_HTTP_BACKEND", "beast or cpprest.", &httpBackend},
  });
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
