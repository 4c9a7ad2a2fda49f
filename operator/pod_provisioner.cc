#include "operator/pod_provisioner.h"

#include <charconv>

#include "kube/resource.h"
#include "operator/kube_adapters.h"
#include "sharding/shard_id.h"

namespace kshard::manager {
namespace {

nlohmann::json subjectsOf(const nlohmann::json& rb) {
  auto it = rb.find("subjects");
  if (it == rb.end() || !it->is_array()) return nlohmann::json::array();
  std::set<std::pair<std::string, std::string>> set;
  for (const auto& s : *it) {
    if (!s.is_object()) continue;
    set.emplace(s.value("namespace", ""), s.value("name", ""));
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [ns, name] : set) out.push_back({ns, name});
  return out;
}

}  // namespace

StatusOr<std::int32_t> shardCountForPod(const PodInfo& pod, std::int32_t defaultShards) {
  auto it = pod.annotations.find(kShardsAnnotation);
  if (it == pod.annotations.end()) return defaultShards;
  const std::string& text = it->second;
  std::int32_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < sharding::kMinShardCount ||
      n > sharding::kMaxShardCount) {
    return invalidArgument("annotation " + std::string(kShardsAnnotation) + "=\"" + text +
                           "\": must be an integer in 1..100000");
  }
  return n;
}

Status mayCreateShardMap(const PodInfo& pod, std::size_t shardMaps, std::size_t maxPerNamespace) {
  if (!pod.annotations.contains(kInjectedAnnotation)) {
    return failedPrecondition("the pod was not injected by kshard (no " +
                              std::string(kInjectedAnnotation) +
                              " annotation): only annotated pods, which the webhook injects, "
                              "get a ShardMap created for them");
  }
  if (shardMaps >= maxPerNamespace) {
    return failedPrecondition("namespace " + pod.namespace_ + " has " + std::to_string(shardMaps) +
                              " ShardMaps, the most the operator "
                              "creates in one (--max-shard-maps-per-namespace); create it "
                              "yourself if it is meant to exist");
  }
  return {};
}

bool pendingCreateCounts(const std::optional<SteadyTime>& answered, SteadyTime now) {
  return !answered || now - *answered < kCreatedSettle;
}

std::size_t shardMapsCounted(const std::string& ns, const std::vector<std::string>& cached,
                             const PendingCreates& pending, SteadyTime now) {
  const std::string prefix = ns + "/";
  std::set<std::string> counted;
  for (const std::string& key : cached) {
    if (key.starts_with(prefix)) counted.insert(key);
  }
  for (const auto& [key, answered] : pending) {
    if (key.starts_with(prefix) && pendingCreateCounts(answered, now)) {
      counted.insert(key);
    }
  }
  return counted.size();
}

nlohmann::json newShardMapObject(const std::string& ns, const std::string& name,
                                 std::int32_t shards) {
  return {{"apiVersion", kShardMapResource.apiVersion()},
          {"kind", "ShardMap"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels", {{"app.kubernetes.io/managed-by", "kshard-operator"}}}}},
          {"spec", {{"shards", shards}}}};
}

nlohmann::json sidecarRoleBindingObject(const std::string& ns, const std::string& name,
                                        const std::string& clusterRole,
                                        const std::set<std::string>& serviceAccounts) {
  nlohmann::json subjects = nlohmann::json::array();
  for (const auto& sa : serviceAccounts) {
    subjects.push_back({{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", ns}});
  }
  return {
      {"apiVersion", kube::resources::kRoleBindings.apiVersion()},
      {"kind", "RoleBinding"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels", {{"app.kubernetes.io/managed-by", "kshard-operator"}}}}},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", clusterRole}}},
      {"subjects", std::move(subjects)}};
}

bool roleBindingMatches(const nlohmann::json& existing, const nlohmann::json& desired) {
  return existing.value("roleRef", nlohmann::json()) ==
             desired.value("roleRef", nlohmann::json()) &&
         subjectsOf(existing) == subjectsOf(desired);
}

PodProvisioner::PodProvisioner(kube::Client& api, const kube::Informer& pods,
                               const kube::Informer& shardMaps, kube::EventRecorder& events,
                               Logger logger, PodProvisionerOptions options)
    : api_(api),
      pods_(pods),
      shardMaps_(shardMaps),
      events_(events),
      log_(std::move(logger)),
      options_(std::move(options)) {}

void PodProvisioner::podSeen(const PodInfo& pod) {
  {
    std::lock_guard lock(mu_);
    if (!leading_) return;
  }
  if (options_.createShardMaps) ensureShardMap(pod);
  if (options_.manageRbac) syncNamespace(pod.namespace_);
}

void PodProvisioner::podGone(const std::string& ns) {
  {
    std::lock_guard lock(mu_);
    if (!leading_) return;
  }
  if (options_.manageRbac) syncNamespace(ns);
}

void PodProvisioner::startLeading() {
  {
    std::lock_guard lock(mu_);
    leading_ = true;
  }
  std::set<std::string> namespaces;
  for (const kube::ObjectPtr& obj : pods_.store().list()) {
    auto pod = podInfoFromJson(*obj);
    if (!pod.ok()) continue;
    namespaces.insert(pod->namespace_);
    if (options_.createShardMaps) ensureShardMap(*pod);
  }
  if (options_.manageRbac) {
    for (const auto& ns : namespaces) syncNamespace(ns);
  }
}

void PodProvisioner::stopLeading() {
  std::lock_guard lock(mu_);
  leading_ = false;
}

void PodProvisioner::ensureShardMap(const PodInfo& pod) {
  auto label = pod.labels.find(kShardMapLabel);
  if (label == pod.labels.end() || label->second.empty()) return;
  const std::string& name = label->second;
  const std::string key = pod.namespace_ + "/" + name;
  {
    std::lock_guard lock(mu_);
    // A create answered and since shown by the informer, or no longer counted, is done.
    const SteadyTime now = std::chrono::steady_clock::now();
    std::erase_if(creating_, [&](const auto& entry) {
      const auto& [pendingKey, answered] = entry;
      return answered && (!pendingCreateCounts(answered, now) ||
                          shardMaps_.store().getByKey(pendingKey) != nullptr);
    });
    if (shardMaps_.store().getByKey(key) || creating_.contains(key)) return;
    if (Status may = mayCreateShardMap(pod, shardMapsLocked(pod.namespace_, now),
                                       options_.maxShardMapsPerNamespace);
        !may.ok()) {
      refuseShardMapLocked(pod, name, may.message());
      return;
    }
    creating_.emplace(key, std::nullopt);
  }
  auto shards = shardCountForPod(pod, options_.defaultShards);
  if (!shards.ok()) {
    log_.warn("not creating ShardMap: invalid shard count",
              {{"shard_map", key}, {"pod", pod.name}, {"error", shards.status().message()}});
    kube::ObjectReference ref{"v1", "Pod", pod.namespace_, pod.name, pod.uid, "", ""};
    events_.record(ref, kube::EventType::kWarning, "InvalidShardCount", "CreateShardMap",
                   "not creating ShardMap " + name + ": " + shards.status().message());
    std::lock_guard lock(mu_);
    creating_.erase(key);
    return;
  }
  log_.info(
      "creating missing ShardMap",
      {{"shard_map", key}, {"pod", pod.name}, {"shards", static_cast<std::int64_t>(*shards)}});
  api_.callAsync(kube::createRequest(kShardMapResource, pod.namespace_,
                                     newShardMapObject(pod.namespace_, name, *shards)),
                 [weak = weak_from_this(), key](StatusOr<nlohmann::json> r) {
                   auto self = weak.lock();
                   if (!self) return;
                   if (!r.ok() && r.status().code() != StatusCode::kAlreadyExists) {
                     self->log_.warn("creating ShardMap failed",
                                     {{"shard_map", key}, {"error", r.status().toString()}});
                   }
                   std::lock_guard lock(self->mu_);
                   if (r.ok() || r.status().code() == StatusCode::kAlreadyExists) {
                     // Counted against the cap until the informer shows it.
                     self->creating_[key] = std::chrono::steady_clock::now();
                   } else {
                     self->creating_.erase(key);
                   }
                 });
}

std::size_t PodProvisioner::shardMapsLocked(const std::string& ns, SteadyTime now) const {
  return shardMapsCounted(ns, shardMaps_.store().keys(), creating_, now);
}

void PodProvisioner::refuseShardMapLocked(const PodInfo& pod, const std::string& name,
                                          const std::string& reason) {
  if (refused_.size() >= 4096) refused_.clear();
  if (!refused_.insert(pod.uid).second) return;
  log_.info("not creating ShardMap",
            {{"shard_map", pod.namespace_ + "/" + name}, {"pod", pod.name}, {"reason", reason}});
  kube::ObjectReference ref{"v1", "Pod", pod.namespace_, pod.name, pod.uid, "", ""};
  events_.record(ref, kube::EventType::kWarning, "ShardMapNotCreated", "CreateShardMap",
                 "not creating ShardMap " + name + ": " + reason);
}

void PodProvisioner::syncNamespace(const std::string& ns) {
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = syncing_.emplace(ns, false);
    if (!inserted) {
      it->second = true;  // run again once the sync in flight is done
      return;
    }
  }
  std::set<std::string> accounts;
  for (const kube::ObjectPtr& obj : pods_.store().list()) {
    auto pod = podInfoFromJson(*obj);
    if (pod.ok() && pod->namespace_ == ns && !pod->serviceAccount.empty()) {
      accounts.insert(pod->serviceAccount);
    }
  }
  nlohmann::json desired =
      sidecarRoleBindingObject(ns, options_.roleBindingName, options_.clusterRole, accounts);
  api_.callAsync(
      kube::getRequest(kube::resources::kRoleBindings, ns, options_.roleBindingName),
      [weak = weak_from_this(), ns, desired](StatusOr<nlohmann::json> existing) mutable {
        auto self = weak.lock();
        if (!self) return;
        auto done = [weak, ns](StatusOr<nlohmann::json> r) {
          auto s = weak.lock();
          if (!s) return;
          if (!r.ok()) {
            s->log_.warn("writing the sidecar RoleBinding failed",
                         {{"namespace", ns}, {"error", r.status().toString()}});
          } else {
            s->log_.info("sidecar RoleBinding written", {{"namespace", ns}});
          }
          s->finishNamespace(ns);
        };
        if (!existing.ok()) {
          if (existing.status().code() != StatusCode::kNotFound) {
            done(existing.status());
            return;
          }
          if (desired["subjects"].empty()) {
            self->finishNamespace(ns);
            return;
          }
          self->api_.callAsync(
              kube::createRequest(kube::resources::kRoleBindings, ns, std::move(desired)), done);
          return;
        }
        if (roleBindingMatches(*existing, desired)) {
          self->finishNamespace(ns);
          return;
        }
        // The update carries the resourceVersion read: a concurrent change fails with Conflict
        // and the next pod event recomputes the subjects.
        desired["metadata"]["resourceVersion"] = existing->value(
            nlohmann::json::json_pointer("/metadata/resourceVersion"), std::string());
        self->api_.callAsync(
            kube::updateRequest(kube::resources::kRoleBindings, ns, std::move(desired)), done);
      });
}

void PodProvisioner::finishNamespace(const std::string& ns) {
  bool again = false;
  {
    std::lock_guard lock(mu_);
    auto it = syncing_.find(ns);
    if (it == syncing_.end()) return;
    again = it->second;
    syncing_.erase(it);
  }
  if (again) syncNamespace(ns);
}

}  // namespace kshard::manager
