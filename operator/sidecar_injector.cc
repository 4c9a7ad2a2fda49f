#include "operator/sidecar_injector.h"

#include <charconv>
#include <random>

#include "base/base64.h"
#include "base/utf8.h"
#include "protocol/audiences.h"
#include "protocol/wire.h"

namespace kshard::manager {

using nlohmann::json;

namespace {

constexpr char kInjectAnnotation[] = "kshard.io/inject";
constexpr char kShardMapAnnotation[] = "kshard.io/shard-map";
constexpr char kAppPortAnnotation[] = "kshard.io/app-port";
constexpr char kVersionLabelAnnotation[] = "kshard.io/version-label";
constexpr char kInjectedAnnotation[] = "kshard.io/injected";
constexpr char kDefaultVersionLabel[] = "app.kubernetes.io/version";

std::optional<std::string> stringAt(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return std::nullopt;
    auto it = cur->find(key);
    if (it == cur->end()) return std::nullopt;
    cur = &*it;
  }
  if (!cur->is_string()) return std::nullopt;
  return cur->get<std::string>();
}

// The integer at `key` of `obj`; nullopt when absent or not an integer (a float such as 1e300 has
// no int64 value: converting it would be undefined behaviour).
std::optional<std::int64_t> integerAt(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

json fieldEnv(const char* name, const std::string& fieldPath) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", fieldPath}}}}}};
}

json valueEnv(const char* name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

bool hasSidecar(const json& spec) {
  for (const char* list : {"containers", "initContainers"}) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (const auto& c : *it) {
      if (stringAt(c, {"name"}) == kSidecarContainerName) return true;
    }
  }
  return false;
}

json admissionResponse(const json& uid, bool allowed, const std::string& message, const json* patch,
                       const std::vector<std::string>& warnings = {}) {
  json response = {{"uid", uid}, {"allowed", allowed}};
  if (!allowed) response["status"] = {{"code", 403}, {"message", message}};
  if (!warnings.empty()) response["warnings"] = warnings;
  if (patch != nullptr && !patch->empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = base64Encode(patch->dump());
  }
  return {
      {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
}

// 128 random bits in hex: a pod's drain token.
std::string randomSecret() {
  std::random_device device;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t word = device();
    for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(word >> shift) & 0xf]);
  }
  return out;
}

// The port of an httpGet hook as a number: named ports are looked up in the container's ports.
std::optional<std::int64_t> hookPort(const json& port, const json& container) {
  if (port.is_number_integer()) return port.get<std::int64_t>();
  if (!port.is_string()) return std::nullopt;
  const std::string name = port.get<std::string>();
  if (auto it = container.find("ports"); it != container.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (stringAt(p, {"name"}) == name) return integerAt(p, "containerPort");
    }
  }
  std::int64_t n = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec == std::errc() && ptr == name.data() + name.size()) return n;
  return std::nullopt;
}

}  // namespace

PreStopPlan planPreStop(const json& container) {
  PreStopPlan plan;
  const json* hook = nullptr;
  if (auto l = container.find("lifecycle"); l != container.end() && l->is_object()) {
    if (auto p = l->find("preStop"); p != l->end() && p->is_object()) hook = &*p;
  }
  if (hook == nullptr) return plan;
  if (auto get = hook->find("httpGet"); get != hook->end() && get->is_object()) {
    const auto port = hookPort(get->value("port", json()), container);
    if (port && *port >= 1 && *port <= 65535) {
      json moved = *get;
      moved["port"] = *port;
      plan.moved = {{"httpGet", std::move(moved)}};
      return plan;
    }
  } else if (auto sleep = hook->find("sleep"); sleep != hook->end() && sleep->is_object()) {
    plan.moved = {{"sleep", *sleep}};
    return plan;
  }
  plan.keepApps = true;
  plan.warning =
      "kshard: the app container's own preStop hook (exec, or an httpGet whose port cannot be "
      "resolved) stays, and kshard cannot run its drain before it: this pod's entities are "
      "stopped and its shards handed off only after the app has exited. Use an httpGet or sleep "
      "hook (kshard runs it after the drain), or call POST 127.0.0.1:7100/v1/drain from it";
  return plan;
}

std::string jsonPointerEscape(std::string_view key) {
  std::string out(key);
  // RFC 6901, 3: '~' becomes "~0" and '/' becomes "~1".
  for (auto at = out.find_first_of("~/"); at != std::string::npos;
       at = out.find_first_of("~/", at + 2)) {
    out.replace(at, 1, out[at] == '~' ? "~0" : "~1");
  }
  return out;
}

json SidecarInjector::tokenVolume(const std::string& ns, const std::string& shardMap) {
  const auto token = [](std::string audience, const char* path) {
    return json{{"serviceAccountToken",
                 {{"audience", std::move(audience)}, {"expirationSeconds", 3600}, {"path", path}}}};
  };
  json volume = json::object();
  volume["name"] = kTokenVolumeName;
  volume["projected"]["sources"] =
      json::array({token(std::string(protocol::kOperatorAudience), kOperatorTokenFile),
                   token(protocol::peerAudience(ns + "/" + shardMap), kPeerTokenFile)});
  return volume;
}

SidecarInjector::SidecarInjector(InjectionConfig config, SpecLookup lookup, Logger logger,
                                 SecretSource secrets)
    : config_(std::move(config)),
      lookup_(std::move(lookup)),
      log_(std::move(logger)),
      secrets_(secrets ? std::move(secrets) : SecretSource(randomSecret)) {}

json SidecarInjector::sidecarContainer(const std::string& shardMap, std::int64_t appPort,
                                       const std::string& versionLabel, json extraEnv) const {
  const auto port = [](std::int64_t p) { return json(p); };
  json env = json::array({
      fieldEnv("POD_NAME", "metadata.name"),
      fieldEnv("POD_NAMESPACE", "metadata.namespace"),
      fieldEnv("POD_UID", "metadata.uid"),
      fieldEnv("POD_IP", "status.podIP"),
      fieldEnv("HOST_IP", "status.hostIP"),
      fieldEnv("KSHARD_VERSION", "metadata.labels['" + versionLabel + "']"),
      valueEnv("KSHARD_SHARD_MAP", shardMap),
      valueEnv("KSHARD_APP_PORT", std::to_string(appPort)),
      valueEnv("KSHARD_API_PORT", std::to_string(config_.apiPort)),
      valueEnv("KSHARD_PEER_PORT", std::to_string(config_.peerPort)),
      valueEnv("KSHARD_ADMIN_PORT", std::to_string(config_.adminPort)),
      valueEnv("KSHARD_MAX_BODY_BYTES", std::to_string(config_.maxBodyBytes)),
      valueEnv("KSHARD_MAX_CONCURRENT_STOPS", std::to_string(config_.maxConcurrentStops)),
      valueEnv("KSHARD_MAX_PENDING_TELLS", std::to_string(config_.maxPendingTells)),
      valueEnv("KSHARD_MAX_PENDING_TELL_BYTES", std::to_string(config_.maxPendingTellBytes)),
      valueEnv("KSHARD_LOG_LEVEL", config_.logLevel),
      valueEnv("KSHARD_MANAGER_TOKEN_FILE",
               std::string(kTokenMountPath) + "/" + kOperatorTokenFile),
      valueEnv("KSHARD_PEER_TOKEN_FILE", std::string(kTokenMountPath) + "/" + kPeerTokenFile),
      valueEnv("KSHARD_PEER_AUTH", config_.peerAuth),
  });
  if (config_.peerAuth == "token") {
    env.push_back(valueEnv("KSHARD_OPERATOR_IDENTITY", config_.operatorIdentity));
  }
  for (auto& e : extraEnv) env.push_back(std::move(e));
  json c = {
      {"name", kSidecarContainerName},
      {"image", config_.image},
      {"imagePullPolicy", config_.imagePullPolicy},
      {"env", env},
      {"ports",
       json::array({{{"name", "kshard-peer"}, {"containerPort", port(config_.peerPort)}},
                    {{"name", "kshard-admin"}, {"containerPort", port(config_.adminPort)}}})},
      // Started = the process answers; the app may start then (registration waits for the app).
      {"startupProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", port(config_.adminPort)}}},
        {"periodSeconds", 1},
        {"failureThreshold", 120}}},
      // Ready = registered with the operator and not draining.
      {"readinessProbe",
       {{"httpGet", {{"path", "/readyz"}, {"port", port(config_.adminPort)}}},
        {"periodSeconds", 2},
        {"failureThreshold", 2}}},
      {"livenessProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", port(config_.adminPort)}}},
        {"periodSeconds", 10},
        {"failureThreshold", 3}}},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", 65532},
        {"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", json::array({"ALL"})}}},
        // What the "restricted" Pod Security level asks of every container.
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
  };
  // The pod's own tokens, for the operator and for its peers: bound to this pod, each for one
  // audience, so they are worth nothing to the Kubernetes API nor to the other party, and name
  // the pod to whoever checks them. The app container does not get them.
  c["volumeMounts"] = json::array(
      {{{"name", kTokenVolumeName}, {"mountPath", kTokenMountPath}, {"readOnly", true}}});
  if (!config_.resources.empty()) c["resources"] = config_.resources;
  if (config_.nativeSidecar) c["restartPolicy"] = "Always";
  return c;
}

std::optional<std::size_t> appContainerIndex(const json& spec, std::int64_t appPort) {
  std::optional<std::size_t> app;
  if (spec.contains("containers") && spec["containers"].is_array() && !spec["containers"].empty()) {
    const json& containers = spec["containers"];
    app = 0;
    for (std::size_t i = 0; i < containers.size(); ++i) {
      const json& c = containers[i];
      if (!c.is_object() || !c.contains("ports") || !c["ports"].is_array()) continue;
      for (const auto& p : c["ports"]) {
        if (integerAt(p, "containerPort") == appPort) app = i;
      }
    }
  }
  return app;
}

std::int64_t drainGracePeriodSeconds(sharding::Duration handoffTimeout,
                                     const InjectionConfig& config) {
  const std::int64_t handoffSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(handoffTimeout).count();
  // All three are non-negative; the sum saturates instead of overflowing.
  const auto saturatingAdd = [](std::int64_t a, std::int64_t b) {
    return a > INT64_MAX - b ? INT64_MAX : a + b;
  };
  return saturatingAdd(saturatingAdd(handoffSeconds, config.gracePeriodMarginSeconds),
                       config.unregisterHoldSeconds);
}

namespace {

// Who the pod is for kshard, read from its annotations, labels and namespace.
struct InjectionTarget {
  std::string shardMap;
  std::string podNamespace;
  std::int64_t appPort = 8080;
};

// The annotation kshard.io/shard-map, else the label app.kubernetes.io/name, else app.
std::string shardMapNameOf(const json& pod) {
  return stringAt(pod, {"metadata", "annotations", kShardMapAnnotation})
      .value_or(stringAt(pod, {"metadata", "labels", "app.kubernetes.io/name"})
                    .value_or(stringAt(pod, {"metadata", "labels", "app"}).value_or("")));
}

// The annotation kshard.io/app-port (8080 when absent): a port number, not one of the sidecar's.
StatusOr<std::int64_t> appPortOf(const json& pod, const InjectionConfig& config) {
  std::int64_t appPort = 8080;
  if (auto text = stringAt(pod, {"metadata", "annotations", kAppPortAnnotation})) {
    auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), appPort);
    if (ec != std::errc() || ptr != text->data() + text->size() || appPort < 1 || appPort > 65535) {
      return invalidArgument("annotation kshard.io/app-port: must be a port number 1..65535");
    }
  }
  for (std::int64_t p : {config.apiPort, config.peerPort, config.adminPort}) {
    if (p == appPort) {
      return invalidArgument("annotation kshard.io/app-port: " + std::to_string(appPort) +
                             " is a port of the kshard sidecar");
    }
  }
  return appPort;
}

// The pod's ShardMap, namespace and app port; InvalidArgument (the denial) when one is missing
// or not valid.
StatusOr<InjectionTarget> injectionTarget(const json& pod, const std::string& ns,
                                          const InjectionConfig& config) {
  InjectionTarget target;
  target.shardMap = shardMapNameOf(pod);
  if (target.shardMap.empty()) {
    return invalidArgument(
        "kshard cannot tell which ShardMap this pod belongs to: set the annotation "
        "kshard.io/shard-map or the label app.kubernetes.io/name");
  }
  // The admission request names the namespace; a pod object may too.
  target.podNamespace = !ns.empty() ? ns : stringAt(pod, {"metadata", "namespace"}).value_or("");
  if (!protocol::isDnsLabel(target.podNamespace)) {
    return invalidArgument("kshard cannot tell which namespace this pod is created in");
  }
  if (!protocol::isDnsSubdomain(target.shardMap)) {
    // Cut on a character boundary: the message goes into JSON, which must stay UTF-8.
    std::string shown = target.shardMap.substr(0, 64);
    while (!validateUtf8(shown).ok()) shown.pop_back();
    return invalidArgument("ShardMap name \"" + shown +
                           "\" is not a valid object name (lowercase, digits, '-' and '.')");
  }
  auto appPort = appPortOf(pod, config);
  if (!appPort.ok()) return appPort.status();
  target.appPort = *appPort;
  return target;
}

// The label the operator watches, and the annotation that says how the sidecar was injected.
void addShardMapLabel(json& patch, const json& metadata, const std::string& shardMap,
                      bool nativeSidecar) {
  if (!metadata.contains("labels") || !metadata["labels"].is_object()) {
    patch.push_back({{"op", "add"},
                     {"path", "/metadata/labels"},
                     {"value", {{sharding::kShardMapLabel, shardMap}}}});
  } else {
    patch.push_back({{"op", "add"},
                     {"path", "/metadata/labels/" + jsonPointerEscape(sharding::kShardMapLabel)},
                     {"value", shardMap}});
  }
  patch.push_back({{"op", "add"},
                   {"path", "/metadata/annotations/" + jsonPointerEscape(kInjectedAnnotation)},
                   {"value", nativeSidecar ? "native-sidecar" : "container"}});
}

// The sidecar: the first init container when native, else one more regular container.
void addSidecar(json& patch, const json& spec, const json& sidecar, bool nativeSidecar) {
  if (nativeSidecar) {
    if (!spec.contains("initContainers") || !spec["initContainers"].is_array()) {
      patch.push_back(
          {{"op", "add"}, {"path", "/spec/initContainers"}, {"value", json::array({sidecar})}});
    } else {
      // First, so that other init containers can already use it.
      patch.push_back({{"op", "add"}, {"path", "/spec/initContainers/0"}, {"value", sidecar}});
    }
  } else {
    patch.push_back({{"op", "add"}, {"path", "/spec/containers/-"}, {"value", sidecar}});
  }
}

void addVolume(json& patch, const json& spec, const json& volume) {
  if (!spec.contains("volumes") || !spec["volumes"].is_array()) {
    patch.push_back({{"op", "add"}, {"path", "/spec/volumes"}, {"value", json::array({volume})}});
  } else {
    patch.push_back({{"op", "add"}, {"path", "/spec/volumes/-"}, {"value", volume}});
  }
}

// The preStop drain on the app container (`app` in spec.containers), with the pod's token; the
// app's own hook (moved to the sidecar, which runs it after the drain) is replaced.
void addDrainHook(json& patch, const json& spec, std::size_t app, std::int64_t adminPort,
                  const std::string& drainToken) {
  const json& c = spec["containers"][app];
  const json drain = {
      {"httpGet",
       {{"path", "/v1/drain"},
        {"port", adminPort},
        {"httpHeaders", json::array({{{"name", std::string(protocol::kDrainTokenHeader)},
                                      {"value", drainToken}}})}}}};
  const std::string base = "/spec/containers/" + std::to_string(app);
  if (!c.contains("lifecycle") || !c["lifecycle"].is_object()) {
    patch.push_back(
        {{"op", "add"}, {"path", base + "/lifecycle"}, {"value", {{"preStop", drain}}}});
  } else {
    patch.push_back({{"op", c["lifecycle"].contains("preStop") ? "replace" : "add"},
                     {"path", base + "/lifecycle/preStop"},
                     {"value", drain}});
  }
}

// terminationGracePeriodSeconds raised to `needed` when the pod's (30 s by default) is shorter.
void addGracePeriod(json& patch, const json& spec, std::int64_t needed) {
  const std::int64_t current = integerAt(spec, "terminationGracePeriodSeconds").value_or(30);
  if (current < needed) {
    patch.push_back({{"op", spec.contains("terminationGracePeriodSeconds") ? "replace" : "add"},
                     {"path", "/spec/terminationGracePeriodSeconds"},
                     {"value", needed}});
  }
}

}  // namespace

StatusOr<json> SidecarInjector::patchFor(const json& pod, const std::string& ns,
                                         std::vector<std::string>* warnings) const {
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) {
    return invalidArgument("the object is not a pod with a spec");
  }
  const json& spec = pod["spec"];
  json patch = json::array();
  if (stringAt(pod, {"metadata", "annotations", kInjectAnnotation}) != "true") return patch;
  if (hasSidecar(spec)) return patch;  // injected already: injection is idempotent
  auto target = injectionTarget(pod, ns, config_);
  if (!target.ok()) return target.status();
  const std::string& shardMap = target->shardMap;

  const auto existingSpec = lookup_ ? lookup_(ns, shardMap) : std::nullopt;
  std::string versionLabel = existingSpec ? existingSpec->versionLabel : kDefaultVersionLabel;
  if (auto v = stringAt(pod, {"metadata", "annotations", kVersionLabelAnnotation}))
    versionLabel = *v;
  const auto handoff =
      existingSpec ? existingSpec->handoffTimeout : sharding::ShardMapSpec{}.handoffTimeout;

  addShardMapLabel(patch, pod["metadata"], shardMap, config_.nativeSidecar);

  // The app container and its preStop: the drain's token, and the app's own hook, go to the
  // sidecar's environment.
  const std::optional<std::size_t> app = appContainerIndex(spec, target->appPort);
  const PreStopPlan preStop = app ? planPreStop(spec["containers"][*app]) : PreStopPlan{};
  if (preStop.warning && warnings != nullptr) warnings->push_back(*preStop.warning);
  const std::string drainToken = secrets_();
  json extraEnv = json::array({valueEnv("KSHARD_DRAIN_TOKEN", drainToken)});
  if (!preStop.moved.is_null()) {
    extraEnv.push_back(valueEnv("KSHARD_APP_PRESTOP", preStop.moved.dump()));
  }

  addSidecar(patch, spec,
             sidecarContainer(shardMap, target->appPort, versionLabel, std::move(extraEnv)),
             config_.nativeSidecar);
  addVolume(patch, spec, tokenVolume(target->podNamespace, shardMap));
  if (app && !preStop.keepApps) addDrainHook(patch, spec, *app, config_.adminPort, drainToken);
  // A grace period long enough for the drain: the longest unregister hold, the handoff, and a
  // margin.
  addGracePeriod(patch, spec, drainGracePeriodSeconds(handoff, config_));
  return patch;
}

SidecarInjector::Answer SidecarInjector::review(std::string_view body) const {
  const auto bad = [](const std::string& message) {
    return Answer{400, json{{"error", {{"code", "BadRequest"}, {"message", message}}}}.dump()};
  };
  json review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded() || !review.is_object()) return bad("body is not a JSON object");
  if (stringAt(review, {"kind"}) != "AdmissionReview") return bad("kind: must be AdmissionReview");
  auto request = review.find("request");
  if (request == review.end() || !request->is_object()) return bad("request: required");
  auto uid = request->find("uid");
  if (uid == request->end() || !uid->is_string() || uid->get<std::string>().empty()) {
    return bad("request.uid: required");
  }
  const std::string ns = stringAt(*request, {"namespace"}).value_or("");
  const auto object = request->find("object");
  const std::string name = (object != request->end() && object->is_object())
                               ? stringAt(*object, {"metadata", "generateName"})
                                     .value_or(stringAt(*object, {"metadata", "name"}).value_or(""))
                               : "";
  if (stringAt(*request, {"operation"}) != "CREATE" || object == request->end()) {
    return {200, admissionResponse(*uid, true, "", nullptr).dump()};
  }
  std::vector<std::string> warnings;
  auto patch = patchFor(*object, ns, &warnings);
  if (!patch.ok()) {
    log_.warn("pod refused",
              {{"namespace", ns}, {"pod", name}, {"reason", patch.status().message()}});
    return {200, admissionResponse(*uid, false, patch.status().message(), nullptr).dump()};
  }
  if (!patch->empty()) log_.info("sidecar injected", {{"namespace", ns}, {"pod", name}});
  return {200, admissionResponse(*uid, true, "", &*patch, warnings).dump()};
}

}  // namespace kshard::manager
