#include "operator/pod_directory.h"

#include <array>
#include <utility>

#include "base/enum_names.h"
#include "kube/api_time.h"

namespace kshard::manager {
namespace {

std::map<std::string, std::string> stringMap(const nlohmann::json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

std::string stringAt(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

constexpr std::array<const char*, 2> kStatusLists = {"initContainerStatuses", "containerStatuses"};

// Every container status in status.initContainerStatuses and status.containerStatuses has a
// `state.terminated`, and there is at least one.
bool allContainersTerminated(const nlohmann::json& status) {
  if (!status.is_object()) return false;
  std::size_t seen = 0;
  for (const char* list : kStatusLists) {
    auto it = status.find(list);
    if (it == status.end() || !it->is_array()) continue;
    for (const auto& c : *it) {
      const auto state = c.is_object() ? c.find("state") : c.end();
      if (!c.is_object() || state == c.end() || !state->is_object() ||
          !state->contains("terminated")) {
        return false;
      }
      ++seen;
    }
  }
  return seen > 0;
}

// A container status reduced to what allContainersTerminated reads: which state it is in.
nlohmann::json slimContainerStatus(const nlohmann::json& c) {
  nlohmann::json state = nlohmann::json::object();
  if (auto it = c.find("state"); it != c.end() && it->is_object()) {
    for (const auto& [key, unused] : it->items()) state[key] = nlohmann::json::object();
  }
  return nlohmann::json{{"state", std::move(state)}};
}

}  // namespace

StatusOr<PodInfo> podInfoFromJson(const nlohmann::json& pod) {
  if (!pod.is_object()) return invalidArgument("pod: not a JSON object");
  const nlohmann::json empty = nlohmann::json::object();
  const auto& meta = pod.contains("metadata") ? pod.at("metadata") : empty;
  const auto& spec = pod.contains("spec") ? pod.at("spec") : empty;
  const auto& status = pod.contains("status") ? pod.at("status") : empty;
  PodInfo info;
  info.name = stringAt(meta, "name");
  info.namespace_ = stringAt(meta, "namespace");
  info.uid = stringAt(meta, "uid");
  if (info.name.empty()) return invalidArgument("pod: metadata.name is missing");
  if (info.uid.empty()) return invalidArgument("pod " + info.name + ": metadata.uid is missing");
  info.terminating = meta.is_object() && meta.contains("deletionTimestamp") &&
                     !meta.at("deletionTimestamp").is_null();
  if (info.terminating) {
    const auto& when = meta.at("deletionTimestamp");
    if (when.is_string()) {
      if (auto t = kube::parseTime(when.get<std::string>()); t.ok()) info.deletionTimestamp = *t;
    }
    if (auto grace = meta.find("deletionGracePeriodSeconds");
        grace != meta.end() && grace->is_number_integer()) {
      info.deletionGracePeriodSeconds = grace->get<std::int64_t>();
    }
  }
  info.labels = meta.is_object() && meta.contains("labels") ? stringMap(meta.at("labels"))
                                                            : std::map<std::string, std::string>{};
  info.annotations = meta.is_object() && meta.contains("annotations")
                         ? stringMap(meta.at("annotations"))
                         : std::map<std::string, std::string>{};
  info.serviceAccount = stringAt(spec, "serviceAccountName");
  if (info.serviceAccount.empty()) info.serviceAccount = "default";
  info.phase = stringAt(status, "phase");
  info.podIp = stringAt(status, "podIP");
  info.containersTerminated = allContainersTerminated(status);
  return info;
}

bool terminationConfirmed(const PodInfo& pod) {
  const bool final = pod.terminating || pod.phase == "Failed" || pod.phase == "Succeeded";
  return final && pod.containersTerminated;
}

void slimPodObject(nlohmann::json& pod) {
  if (!pod.is_object()) return;
  nlohmann::json slim = nlohmann::json::object();
  auto copy = [](nlohmann::json& from, nlohmann::json& to,
                 std::initializer_list<const char*> keys) {
    if (!from.is_object()) return;
    for (const char* key : keys) {
      auto it = from.find(key);
      if (it != from.end()) to[key] = std::move(*it);
    }
  };
  for (const char* part : {"apiVersion", "kind"}) {
    if (pod.contains(part)) slim[part] = std::move(pod[part]);
  }
  if (pod.contains("metadata")) {
    slim["metadata"] = nlohmann::json::object();
    copy(pod["metadata"], slim["metadata"],
         {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp",
          "deletionGracePeriodSeconds", "labels", "annotations"});
    // kubectl apply keeps the whole object in this annotation: nothing of ours reads it.
    auto& annotations = slim["metadata"]["annotations"];
    if (annotations.is_object()) {
      annotations.erase("kubectl.kubernetes.io/last-applied-configuration");
    } else {
      slim["metadata"].erase("annotations");
    }
  }
  if (pod.contains("spec")) {
    slim["spec"] = nlohmann::json::object();
    copy(pod["spec"], slim["spec"], {"serviceAccountName"});
  }
  if (pod.contains("status")) {
    slim["status"] = nlohmann::json::object();
    copy(pod["status"], slim["status"], {"phase", "podIP"});
    for (const char* list : kStatusLists) {
      auto it = pod["status"].is_object() ? pod["status"].find(list) : pod["status"].end();
      if (it == pod["status"].end() || !it->is_array()) continue;
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : *it) {
        if (c.is_object()) out.push_back(slimContainerStatus(c));
      }
      slim["status"][list] = std::move(out);
    }
  }
  pod = std::move(slim);
}

std::string_view podHealthName(PodHealth health) {
  constexpr std::pair<PodHealth, std::string_view> kNames[] = {
      {PodHealth::kAlive, "alive"},
      {PodHealth::kTerminating, "terminating"},
      {PodHealth::kDead, "dead"}};
  return nameIn(kNames, health, "unknown");
}

PodHealth assessPod(const std::optional<PodInfo>& observed, std::string_view registeredUid) {
  if (!observed) return PodHealth::kDead;
  // Same name, other uid: the registered pod was deleted and a new one (a StatefulSet replica)
  // took its name. The registered one is gone.
  if (observed->uid != registeredUid) return PodHealth::kDead;
  // Its containers have exited for good; nothing of it runs any more.
  if (observed->phase == "Failed" || observed->phase == "Succeeded") return PodHealth::kDead;
  if (observed->terminating) return PodHealth::kTerminating;
  return PodHealth::kAlive;
}

}  // namespace kshard::manager
