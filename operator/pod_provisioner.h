// PodProvisioner: what the pods labelled kshard.io/shard-map need before they can register,
// created by the leader as soon as it sees them (DESIGN.md "Pod start"):
//
//   - their ShardMap, when it does not exist: spec.shards from the pod's kshard.io/shards
//     annotation, else the configured default (300). An invalid annotation creates nothing (the
//     shard count is immutable; guessing would be permanent) and is reported on the pod. Whoever
//     may create pods can label one, so creation is bounded: only for pods the webhook injected,
//     and only while the namespace holds fewer than `maxShardMapsPerNamespace` ShardMaps
//     (mayCreateShardMap); a refusal is reported on the pod too.
//   - a RoleBinding in their namespace granting ClusterRole kshard-sidecar (read and watch
//     ShardMaps) to the ServiceAccounts of the labelled pods there, so their sidecars can watch
//     their map. Kept level-based: the subjects are recomputed from the pod cache on every change.
//
// The decisions are pure functions below; the class does the API calls. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "base/clock.h"
#include "base/logger.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "operator/pod_directory.h"

namespace kshard::manager {

// The shard count for a ShardMap created for `pod`: its kshard.io/shards annotation, else
// `defaultShards`. InvalidArgument naming the annotation when it is not an integer in 1..100000.
[[nodiscard]] StatusOr<std::int32_t> shardCountForPod(const PodInfo& pod,
                                                      std::int32_t defaultShards);

// Whether the operator may create a ShardMap for `pod` in a namespace that holds `shardMaps`
// ShardMaps (or has them being created): the pod carries the injector's kshard.io/injected
// annotation, and the namespace holds fewer than `maxPerNamespace`. FailedPrecondition with the
// reason otherwise.
[[nodiscard]] Status mayCreateShardMap(const PodInfo& pod, std::size_t shardMaps,
                                       std::size_t maxPerNamespace);

// How long a ShardMap the operator created still counts against the cap while the ShardMap
// informer does not show it. The watch event follows the create's answer within milliseconds;
// past this the object is taken to have been deleted in between.
inline constexpr Duration kCreatedSettle = std::chrono::seconds(30);

// The ShardMaps this operator is creating, by "{ns}/{name}": nullopt while the create is in flight,
// else when it was answered.
using PendingCreates = std::map<std::string, std::optional<SteadyTime>>;

// Whether a pending create (nullopt: in flight; else when it was answered) still counts against
// the cap while the informer does not show its ShardMap: until kCreatedSettle after its answer.
// Pure.
bool pendingCreateCounts(const std::optional<SteadyTime>& answered, SteadyTime now);

// The ShardMaps of `ns` that count against the cap: those the informer shows (`cached`, keys
// "{ns}/{name}") and the pending creates it does not show yet, counted until kCreatedSettle after
// their answer. Counting a create only while it is in flight let a pod seen between the create's
// answer and the watch event pass the cap. Pure.
std::size_t shardMapsCounted(const std::string& ns, const std::vector<std::string>& cached,
                             const PendingCreates& pending, SteadyTime now);

// The ShardMap object to create.
nlohmann::json newShardMapObject(const std::string& ns, const std::string& name,
                                 std::int32_t shards);

// The RoleBinding granting `clusterRole` to the ServiceAccounts `serviceAccounts` of `ns`.
nlohmann::json sidecarRoleBindingObject(const std::string& ns, const std::string& name,
                                        const std::string& clusterRole,
                                        const std::set<std::string>& serviceAccounts);
// Whether `existing` already grants what `desired` does (same roleRef, same subjects).
bool roleBindingMatches(const nlohmann::json& existing, const nlohmann::json& desired);

// What the operator's configuration says of provisioning; its defaults live in OperatorConfig
// (operator/config.h), which fills this in.
struct PodProvisionerOptions {
  bool createShardMaps{};
  std::int32_t defaultShards{};
  std::size_t maxShardMapsPerNamespace{};
  bool manageRbac{};
  std::string clusterRole;      // the ClusterRole the sidecars' RoleBinding grants
  std::string roleBindingName;  // that RoleBinding's name in each namespace
};

class PodProvisioner : public std::enable_shared_from_this<PodProvisioner> {
 public:
  // Callbacks of API calls hold a weak reference: create it with std::make_shared.
  PodProvisioner(kube::Client& api, const kube::Informer& pods, const kube::Informer& shardMaps,
                 kube::EventRecorder& events, Logger logger, PodProvisionerOptions options);

  // The pod informer saw this labelled pod (added or updated) / its deletion.
  void podSeen(const PodInfo& pod);
  void podGone(const std::string& ns);
  // Leadership: only the leader writes. Starting reconciles every namespace in the pod cache.
  void startLeading();
  void stopLeading();

 private:
  void ensureShardMap(const PodInfo& pod);
  // ShardMaps of `ns` in the cache, and those created but not seen yet (shardMapsCounted);
  // under mu_.
  std::size_t shardMapsLocked(const std::string& ns, SteadyTime now) const;
  // Logs and reports on the pod, once per pod (its updates come often); under mu_.
  void refuseShardMapLocked(const PodInfo& pod, const std::string& name, const std::string& reason);
  void syncNamespace(const std::string& ns);
  void finishNamespace(const std::string& ns);

  kube::Client& api_;
  const kube::Informer& pods_;
  const kube::Informer& shardMaps_;
  kube::EventRecorder& events_;
  Logger log_;
  const PodProvisionerOptions options_;

  std::mutex mu_;
  bool leading_ = false;
  PendingCreates creating_;              // ShardMaps being created, or created but not seen yet
  std::set<std::string> refused_;        // uids of pods told their ShardMap is not created
  std::map<std::string, bool> syncing_;  // ns -> dirty again while a sync runs
};

}  // namespace kshard::manager
