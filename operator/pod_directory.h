// PodDirectory: the health API of the Shard Manager. What the Kubernetes API says about the pods
// of a ShardMap, from the pod informer's cache, with a fresh GET when a decision needs certainty.
//
// Health rules (DESIGN.md "Health"): a registered pod is dead when its object is gone, its uid
// changed (a new pod of the same name), or its phase is Failed or Succeeded. A pod with a
// deletionTimestamp is alive (it is draining its entities) but gets no new shards. Only a dead
// pod's shards may be taken without its acknowledgement: while a pod is alive, its entities might
// be running.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

using sharding::kShardMapLabel;
// Annotation giving the shard count of a ShardMap the operator creates for a pod.
inline constexpr char kShardsAnnotation[] = "kshard.io/shards";
// Annotation the injector puts on every pod it injected (operator/sidecar_injector.cc).
inline constexpr char kInjectedAnnotation[] = "kshard.io/injected";

// The part of a Pod the operator reads.
struct PodInfo {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string phase;         // Pending, Running, Succeeded, Failed, Unknown
  bool terminating = false;  // metadata.deletionTimestamp is set
  std::string podIp;
  std::string serviceAccount;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // When the kubelet kills the pod at the latest (metadata.deletionTimestamp: the time of the
  // delete plus its grace period), and that grace period (metadata.deletionGracePeriodSeconds).
  // Unset when the pod is not terminating or the API gave no usable value.
  std::optional<WallTime> deletionTimestamp;
  std::optional<std::int64_t> deletionGracePeriodSeconds;
  // The kubelet reported every container of the pod (init containers, native sidecars and the
  // app's) terminated; false when a status lists none.
  bool containersTerminated = false;
  friend bool operator==(const PodInfo&, const PodInfo&) = default;
};

// Whether the kubelet confirmed that nothing of the pod runs, for good: every container
// terminated, and the pod terminating or finished, so that none is restarted. Only then may a
// pod whose object vanished be taken for dead at once (docs/reliability.md): a force delete, or
// the removal of a lost node's pods, removes the object while its processes may still run.
bool terminationConfirmed(const PodInfo& pod);

// Reads a Pod object as the API serves it. InvalidArgument when it has no metadata.name/uid.
[[nodiscard]] StatusOr<PodInfo> podInfoFromJson(const nlohmann::json& pod);
// Keeps of a Pod object only what podInfoFromJson reads (and the metadata the informer needs):
// the pod informer's transform, so that the cache of a thousand pods stays small. The result
// reads the same through podInfoFromJson.
void slimPodObject(nlohmann::json& pod);

enum class PodHealth {
  kAlive,        // running (or starting): its shards stay with it
  kTerminating,  // alive, draining: keeps its shards until it unregisters, gets no new ones
  kDead,         // gone, replaced (uid changed), or finished: its shards may be taken
};
std::string_view podHealthName(PodHealth health);

// The health of the registered pod `registeredUid` given what the API shows for its name
// (nullopt: no such pod). Pure.
PodHealth assessPod(const std::optional<PodInfo>& observed, std::string_view registeredUid);

class PodDirectory {
 public:
  using FetchCallback = std::function<void(StatusOr<std::optional<PodInfo>>)>;

  virtual ~PodDirectory() = default;
  // The informer's view; nullopt when the cache does not hold that pod.
  virtual std::optional<PodInfo> cached(const std::string& ns, const std::string& name) const = 0;
  // The informer's view of every pod of namespace `ns` labelled for ShardMap `shardMap`
  // (kShardMapLabel), in name order.
  virtual std::vector<PodInfo> podsOf(const std::string& ns, const std::string& shardMap) const = 0;
  // A fresh GET from the API server: nullopt when the pod does not exist; an error when the API
  // could not be asked (then nothing may be concluded). `done` runs once, on any thread.
  virtual void fetch(const std::string& ns, const std::string& name, FetchCallback done) = 0;
  // The last state the informer saw of pod `uid` before its object was deleted, when it saw the
  // deletion with the final object (not a relist that found it gone); nullopt otherwise. Kept
  // for a while after the deletion.
  virtual std::optional<PodInfo> finalState(const std::string& ns, const std::string& uid) const = 0;
};

}  // namespace kshard::manager
