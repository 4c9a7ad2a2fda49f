#include "operator/kube_adapters.h"

#include "sharding/shard_map_json.h"

namespace kshard::manager {

std::optional<PodInfo> KubePodDirectory::cached(const std::string& ns,
                                                const std::string& name) const {
  kube::ObjectPtr pod = pods_.store().get(ns, name);
  if (!pod) return std::nullopt;
  auto info = podInfoFromJson(*pod);
  if (!info.ok()) return std::nullopt;
  return std::move(*info);
}

std::vector<PodInfo> KubePodDirectory::podsOf(const std::string& ns,
                                              const std::string& shardMap) const {
  std::vector<PodInfo> out;
  for (const kube::ObjectPtr& object : pods_.store().list()) {
    if (!object->is_object()) continue;
    const auto meta = object->find("metadata");
    if (meta == object->end() || !meta->is_object() || meta->value("namespace", "") != ns) continue;
    const auto labels = meta->find("labels");
    if (labels == meta->end() || !labels->is_object() ||
        labels->value(kShardMapLabel, "") != shardMap) {
      continue;
    }
    if (auto info = podInfoFromJson(*object); info.ok()) out.push_back(std::move(*info));
  }
  return out;
}

void KubePodDirectory::fetch(const std::string& ns, const std::string& name, FetchCallback done) {
  api_.callAsync(kube::getRequest(kube::resources::kPods, ns, name),
                 [done](StatusOr<nlohmann::json> r) {
                   if (!r.ok()) {
                     if (r.status().code() == StatusCode::kNotFound) {
                       done(std::optional<PodInfo>());
                     } else {
                       done(r.status());
                     }
                     return;
                   }
                   auto info = podInfoFromJson(*r);
                   if (!info.ok()) {
                     done(info.status());
                     return;
                   }
                   done(std::optional<PodInfo>(std::move(*info)));
                 });
}

std::optional<PodInfo> KubePodDirectory::finalState(const std::string& ns,
                                                    const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = tombstones_.find(ns + "/" + uid);
  if (it == tombstones_.end()) return std::nullopt;
  return it->second.last;
}

void KubePodDirectory::deleted(const nlohmann::json& last, bool finalStateUnknown) {
  // Kept long enough for any decision about the pod (a lease is a few tens of seconds).
  constexpr Duration kKept = std::chrono::hours(1);
  if (finalStateUnknown) return;  // the last cached state says nothing of how it ended
  auto info = podInfoFromJson(last);
  if (!info.ok()) return;
  const SteadyTime now = clock_.now();
  std::lock_guard lock(mu_);
  std::erase_if(tombstones_, [&](const auto& entry) { return now - entry.second.at > kKept; });
  tombstones_[info->namespace_ + "/" + info->uid] = Tombstone{std::move(*info), now};
}

void KubeEventSink::record(const sharding::ObjectMeta& object, EventType type, std::string reason,
                           std::string message) {
  kube::ObjectReference ref;
  ref.apiVersion = sharding::kShardMapApiVersion;
  ref.kind = sharding::kShardMapKind;
  ref.ns = object.namespace_;
  ref.name = object.name;
  ref.uid = object.uid;
  recorder_.record(
      ref, type == EventType::kWarning ? kube::EventType::kWarning : kube::EventType::kNormal,
      reason, reason, message);
}

}  // namespace kshard::manager
