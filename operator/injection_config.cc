#include "operator/injection_config.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <fstream>
#include <sstream>

#include "base/utf8.h"
#include "protocol/wire.h"

namespace kshard::manager {
namespace {

// YAML to JSON for the resources block (scalars stay strings, as quantities are strings).
nlohmann::json toJson(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = toJson(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : node) out.push_back(toJson(v));
    return out;
  }
  if (node.IsScalar()) return node.Scalar();
  return nullptr;
}

// Whether every key and string in `j` is UTF-8: the injector copies them into JSON patches, which
// cannot carry anything else (encoding the admission answer would fail for every pod).
bool allUtf8(const nlohmann::json& j) {
  if (j.is_string()) return validateUtf8(j.get_ref<const std::string&>()).ok();
  if (!j.is_structured()) return true;
  for (const auto& [key, value] : j.items()) {
    if ((j.is_object() && !validateUtf8(key).ok()) || !allUtf8(value)) return false;
  }
  return true;
}

// The sidecar limits the config carries: key, accepted range, field.
struct SidecarLimit {
  const char* key;
  protocol::IntSetting setting;
  std::int64_t* target;
};
std::array<SidecarLimit, 3> sidecarLimits(InjectionConfig& cfg) {
  return {{{"maxConcurrentStops", protocol::kMaxConcurrentStops, &cfg.maxConcurrentStops},
           {"maxPendingTells", protocol::kMaxPendingTells, &cfg.maxPendingTells},
           {"maxPendingTellBytes", protocol::kMaxPendingTellBytes, &cfg.maxPendingTellBytes}}};
}

Status readPort(const YAML::Node& root, const char* key, std::int64_t& out) {
  if (!root[key]) return {};
  try {
    const auto v = root[key].as<std::int64_t>();
    if (v < 1 || v > 65535) return invalidArgument(std::string(key) + ": must be 1..65535");
    out = v;
  } catch (const YAML::Exception&) {
    return invalidArgument(std::string(key) + ": must be an integer");
  }
  return {};
}

}  // namespace

StatusOr<InjectionConfig> parseInjectionConfig(const std::string& yamlText) {
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception& e) {
    return invalidArgument(std::string("not valid YAML: ") + e.what());
  }
  InjectionConfig cfg;
  if (root.IsNull()) return cfg;
  if (!root.IsMap()) return invalidArgument("must be a mapping");
  try {
    if (root["image"]) cfg.image = root["image"].as<std::string>();
    if (root["imagePullPolicy"]) cfg.imagePullPolicy = root["imagePullPolicy"].as<std::string>();
    if (root["logLevel"]) cfg.logLevel = root["logLevel"].as<std::string>();
    if (root["maxBodyBytes"]) cfg.maxBodyBytes = root["maxBodyBytes"].as<std::int64_t>();
    for (const auto& [key, setting, target] : sidecarLimits(cfg)) {
      if (root[key]) *target = root[key].as<std::int64_t>();
    }
    if (root["gracePeriodMarginSeconds"]) {
      cfg.gracePeriodMarginSeconds = root["gracePeriodMarginSeconds"].as<std::int64_t>();
    }
    if (root["nativeSidecar"]) cfg.nativeSidecar = root["nativeSidecar"].as<bool>();
    if (root["peerAuth"]) cfg.peerAuth = root["peerAuth"].as<std::string>();
    if (root["operatorIdentity"]) cfg.operatorIdentity = root["operatorIdentity"].as<std::string>();
  } catch (const YAML::Exception& e) {
    return invalidArgument(std::string("wrong type: ") + e.what());
  }
  for (auto [key, target] : {std::pair<const char*, std::int64_t*>{"apiPort", &cfg.apiPort},
                             {"peerPort", &cfg.peerPort},
                             {"adminPort", &cfg.adminPort}}) {
    if (Status s = readPort(root, key, *target); !s.ok()) return s;
  }
  if (cfg.image.empty()) return invalidArgument("image: must not be empty");
  if (cfg.imagePullPolicy != "Always" && cfg.imagePullPolicy != "IfNotPresent" &&
      cfg.imagePullPolicy != "Never") {
    return invalidArgument("imagePullPolicy: must be Always, IfNotPresent or Never");
  }
  if (cfg.maxBodyBytes < 1024) return invalidArgument("maxBodyBytes: must be at least 1024");
  for (const auto& [key, setting, target] : sidecarLimits(cfg)) {
    if (*target < setting.min || *target > setting.max) {
      return invalidArgument(std::string(key) + ": must be " + std::to_string(setting.min) + ".." +
                             std::to_string(setting.max));
    }
  }
  if (cfg.gracePeriodMarginSeconds < 0) {
    return invalidArgument("gracePeriodMarginSeconds: must not be negative");
  }
  if (cfg.peerAuth != "token" && cfg.peerAuth != "none") {
    return invalidArgument("peerAuth: must be token or none");
  }
  if (!cfg.operatorIdentity.empty() && !protocol::isServiceAccountSubject(cfg.operatorIdentity)) {
    return invalidArgument(
        "operatorIdentity: must be system:serviceaccount:<namespace>:<name>, or empty for this "
        "operator's own");
  }
  if (root["resources"]) {
    if (!root["resources"].IsMap()) return invalidArgument("resources: must be a mapping");
    try {
      cfg.resources = toJson(root["resources"]);
    } catch (const YAML::Exception& e) {
      return invalidArgument(std::string("resources: ") + e.what());  // a key that is not a string
    }
  }
  for (const auto& [field, value] : {std::pair<const char*, nlohmann::json>{"image", cfg.image},
                                     {"logLevel", cfg.logLevel},
                                     {"resources", cfg.resources}}) {
    if (!allUtf8(value)) return invalidArgument(std::string(field) + ": must be valid UTF-8");
  }
  return cfg;
}

StatusOr<InjectionConfig> loadInjectionConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalidArgument("injection config " + path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  auto cfg = parseInjectionConfig(ss.str());
  if (!cfg.ok()) return cfg.status().withContext("injection config " + path);
  return cfg;
}

}  // namespace kshard::manager
