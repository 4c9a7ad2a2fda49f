// The ShardMap resource (kshard.io/v1alpha1): the model the operator and the sidecar share.
//
// The spec is what the user asks for; the status is where the operator persists the registered
// pods and the assignments (DESIGN.md, "The ShardMap resource"). Assignments are stored per
// (pod, epoch) as shard sets, which keeps the object small; in memory the operator and the sidecar
// use a ShardTable, an owner per shard, which is what the planner and the router need. Field
// names and defaults here are those of DESIGN.md; the JSON codec is in shard_map_json.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sharding/duration.h"
#include "sharding/shard_id.h"
#include "sharding/shard_set.h"

namespace kshard::sharding {

inline constexpr char kShardMapApiVersion[] = "kshard.io/v1alpha1";
inline constexpr char kShardMapKind[] = "ShardMap";
// Label on every pod of a ShardMap (set by the injector) and on its segments; its value is the
// ShardMap's name.
inline constexpr char kShardMapLabel[] = "kshard.io/shard-map";

inline constexpr Duration kMinOwnershipLease = std::chrono::seconds(3);
// The largest spec.handoffFailureLimit: beyond it the throttle would never act in practice.
inline constexpr std::int32_t kMaxHandoffFailureLimit = 1000;
// spec.rememberedEntityTypes: at most this many types, each at most kMaxEntityTypeBytes long
// (an entity type's bound on the app API).
inline constexpr std::size_t kMaxRememberedEntityTypes = 32;
inline constexpr std::size_t kMaxEntityTypeBytes = 253;
// spec.singletons: at most this many, each name 1..kMaxSingletonNameBytes bytes of UTF-8.
inline constexpr std::size_t kMaxSingletons = 100;
inline constexpr std::size_t kMaxSingletonNameBytes = 253;

// What a periodic round balances: the pods' shard counts (sharding/planner.h), or the load their
// shards measure (sharding/load_planner.h).
enum class Balance { kCount, kLoad };
std::string_view balanceName(Balance b);
// "count" or "load"; nullopt otherwise.
std::optional<Balance> parseBalance(std::string_view text);

struct ShardMapSpec {
  std::int32_t shards = 0;  // required, 1..100000, immutable after creation
  std::string versionLabel = "app.kubernetes.io/version";
  Duration rebalanceInterval = std::chrono::seconds(20);
  Duration rebalanceRetryInterval = std::chrono::seconds(10);
  double rebalanceRate = 0.02;  // (0, 1]: a periodic round gives one pod at most this share
  Duration pingTimeout = std::chrono::seconds(3);
  Duration handoffTimeout = std::chrono::seconds(30);
  Duration entityIdleTimeout = std::chrono::seconds(60);  // 0 = never passivate
  // Entities active at once in one pod's app, >= 0; 0 = no limit. Beyond it the least recently
  // used idle entity is passivated first and a new entity waits for its place (sidecar/
  // entity_registry_limit.cc).
  std::int32_t maxActiveEntitiesPerPod = 0;
  Duration sendTimeout = std::chrono::seconds(10);
  // How long a pod keeps serving its shards without confirming that it still owns them, by
  // contact with the operator or with the API server (docs/reliability.md, "Ownership leases").
  // The operator gives away the shards of a pod that vanished without Kubernetes reporting its
  // containers terminated only once this has surely run out. Immutable after creation: both
  // sides must agree on it at every moment.
  Duration ownershipLease = std::chrono::seconds(30);
  Balance balance = Balance::kCount;
  // (0, 10]: in load mode, a pod is overloaded above (1 + loadTolerance) x the mean pod load.
  double loadTolerance = 0.10;
  // A shard whose handoff failed this many times in a row is not moved by balancing until
  // handoffBackoff x 2^(failures - limit), at most 10 minutes, has passed since the last failure
  // (operator/handoff_throttle.h). 0 never throttles.
  std::int32_t handoffFailureLimit = 3;
  Duration handoffBackoff = std::chrono::seconds(30);
  // The entity types whose active entities are recorded and started again, without a message,
  // after their shard moves or their pod crashes (docs/entity-patterns.md, "Remembered
  // entities"). At most kMaxRememberedEntityTypes, each a valid entity type, none twice.
  std::vector<std::string> rememberedEntityTypes;
  // Singletons (docs/entity-patterns.md): each runs on the owner of the shard of its name
  // (shardIdOf(name)), so it moves with that shard's handoff and is never on two pods. Distinct.
  std::vector<std::string> singletons;
  friend bool operator==(const ShardMapSpec&, const ShardMapSpec&) = default;
};

// OK, or InvalidArgument naming the first bad field: "spec.rebalanceRate: must be > 0 and <= 1".
[[nodiscard]] Status validateSpec(const ShardMapSpec& spec);

// The operator replica that leads and answers the manager API.
struct ManagerRef {
  std::string pod;
  std::string address;  // "ip:port"
  friend bool operator==(const ManagerRef&, const ManagerRef&) = default;
};

// A registered pod. Identity is name + uid, never the address. status.pods lists pods in
// registration order, which is the order the planner breaks ties in.
struct RegisteredPod {
  std::string name;
  std::string uid;
  std::string address;  // peer API, "ip:7101"
  std::string version;
  std::int32_t shards = 0;  // how many shards it owns; derived from the assignments
  // The sidecar process that registered (a random id it draws at start): commands name it, and
  // a sidecar refuses commands meant for an earlier or later process of the same pod. Empty
  // for a sidecar that predates incarnations.
  std::string incarnation;
  // The load of its shards as its sidecar last measured it: seconds the app spent on their
  // messages per second. Unknown until the operator has read it.
  std::optional<double> load;
  friend bool operator==(const RegisteredPod&, const RegisteredPod&) = default;
};

// The shards given to `pod` at `epoch`. The epoch is the fencing token the pod was told.
struct Assignment {
  std::string pod;
  std::int64_t epoch = 0;
  ShardSet shards;
  friend bool operator==(const Assignment&, const Assignment&) = default;
};

// metav1.Condition.
struct Condition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::int64_t observedGeneration = 0;
  std::string lastTransitionTime;  // RFC 3339, kept as the API server wrote it
  std::string reason;
  std::string message;
  friend bool operator==(const Condition&, const Condition&) = default;
};

inline constexpr char kConditionReady[] = "Ready";
inline constexpr char kConditionBalanced[] = "Balanced";
inline constexpr char kConditionProgressing[] = "Progressing";

// Adds or updates the condition of `update.type`, like apimachinery's meta.SetStatusCondition:
// lastTransitionTime changes only when the status does (update.lastTransitionTime is the time to
// use then). Returns whether anything changed, so the caller writes the status only when needed.
bool setCondition(std::vector<Condition>& conditions, const Condition& update);
// The condition of that type, or nullptr.
const Condition* findCondition(const std::vector<Condition>& conditions, std::string_view type);

// One of the busiest shards, as measured by its owner.
struct ShardLoadReport {
  ShardId shard = 0;
  std::string pod;
  double load = 0;
  friend bool operator==(const ShardLoadReport&, const ShardLoadReport&) = default;
};

// The spread of the measured load over the registered pods (sharding/load_planner.h's
// LoadSummary), refreshed by the operator's periodic rounds.
struct LoadStatus {
  double peakToMean = 1;  // the busiest pod's load over the mean pod load
  double bound = 1;       // the lowest peak-to-mean any placement reaches: the hottest shard's
  double total = 0;       // the summed load of every pod
  std::vector<ShardLoadReport> hottest;  // the busiest shards, busiest first (kHottestShards)
  friend bool operator==(const LoadStatus&, const LoadStatus&) = default;
};
inline constexpr std::size_t kHottestShards = 10;

struct ShardMapStatus {
  std::int64_t observedGeneration = 0;
  std::int64_t epoch = 0;  // +1 on every persisted change of assignments
  std::optional<ManagerRef> manager;
  std::vector<RegisteredPod> pods;
  std::vector<Assignment> assignments;
  ShardSet unassigned;
  std::int32_t podCount = 0;
  std::int32_t unassignedCount = 0;
  std::vector<Condition> conditions;
  std::optional<LoadStatus> load;  // none until the operator has measured the pods
  friend bool operator==(const ShardMapStatus&, const ShardMapStatus&) = default;
};

// The part of metav1.ObjectMeta kshard reads. Other metadata fields are not kept: the operator
// writes through the status subresource, which never touches them.
struct ObjectMeta {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string resourceVersion;
  std::int64_t generation = 0;
  std::string creationTimestamp;
  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

struct ShardMap {
  ObjectMeta metadata;
  ShardMapSpec spec;
  ShardMapStatus status;
  friend bool operator==(const ShardMap&, const ShardMap&) = default;
};

// A pod by its position in status.pods (registration order).
using PodIndex = std::int32_t;
inline constexpr PodIndex kNoPod = -1;

// Owner and epoch of every shard: the compact in-memory form of the assignments, O(1) lookup,
// about 12 bytes per shard (1.2 MB for 100,000 shards). Pods are PodIndex values into the
// status.pods they were read from.
class ShardTable {
 public:
  // All `shardCount` shards unassigned.
  explicit ShardTable(std::int32_t shardCount);

  std::int32_t shardCount() const { return static_cast<std::int32_t>(owner_.size()); }
  // kNoPod when unassigned. Precondition: 1 <= shard <= shardCount().
  PodIndex owner(ShardId shard) const { return owner_[static_cast<std::size_t>(shard - 1)]; }
  // Epoch of the shard's current assignment; 0 when unassigned.
  std::int64_t epoch(ShardId shard) const { return epoch_[static_cast<std::size_t>(shard - 1)]; }
  // owners()[shard - 1] is the owner of `shard`: the planner's input.
  std::span<const PodIndex> owners() const { return owner_; }

  void assign(ShardId shard, PodIndex pod, std::int64_t epoch);
  void unassign(ShardId shard);
  // Unassigns the pod's shards and renumbers the pods after it (they move up one place, as they
  // do in status.pods when the pod is removed).
  void removePod(PodIndex pod);

  // Shards owned per pod, for pods 0..podCount-1.
  std::vector<std::int32_t> shardCounts(std::int32_t podCount) const;
  ShardSet shardsOf(PodIndex pod) const;
  ShardSet unassigned() const;

  friend bool operator==(const ShardTable&, const ShardTable&) = default;

 private:
  std::vector<PodIndex> owner_;
  std::vector<std::int64_t> epoch_;
};

// Reads status.assignments into a table whose pods index status.pods. InvalidArgument (naming
// the field) for duplicate pod names, an assignment to a pod not in status.pods, a shard in two
// assignments, a shard outside 1..shardCount, or a shard both assigned and in status.unassigned:
// each would break "one owner per shard" if accepted. Shards in no assignment are unassigned.
[[nodiscard]] StatusOr<ShardTable> shardTableFromStatus(const ShardMapStatus& status,
                                                        std::int32_t shardCount);

// Writes the table into status.assignments (ordered by pod registration, then epoch),
// status.unassigned, unassignedCount, podCount and each pod's shard count. Precondition: every
// owner indexes status.pods.
void writeShardTable(const ShardTable& table, ShardMapStatus& status);

}  // namespace kshard::sharding
