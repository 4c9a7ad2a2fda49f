// In-process fakes of everything the ShardMapController talks to, on one ManualScheduler: the
// ShardMap store (the API server's optimistic concurrency), the pods' peer API (stub pods whose
// ownership state is a real sidecar::EntityRegistry, so the real epoch fences decide), the pod
// directory (the health API), leadership and Events. Every I/O answer arrives through the
// scheduler, after a latency, as it would over the network.
//
// After every event a fake processes (a write stored, an assign or unassign applied to a pod) it
// calls the `afterEvent` hook: the tests check "one owner per shard" there, at every step.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/scheduler.h"
#include "operator/event_sink.h"
#include "operator/leadership.h"
#include "operator/pod_client.h"
#include "operator/pod_directory.h"
#include "operator/shard_map_store.h"
#include "sidecar/entity_registry.h"

namespace kshard::manager::testing {

using AfterEvent = std::function<void()>;

class FakeStore final : public ShardMapStore {
 public:
  explicit FakeStore(Scheduler& scheduler) : scheduler_(scheduler) {}

  void load(const protocol::ShardMapRef& ref, Callback done) override;
  void writeStatus(const sharding::ShardMap& map, Callback done) override;

  // Creates or replaces an object as a user would (bumps resourceVersion, generation on spec).
  void put(sharding::ShardMap map);
  std::optional<sharding::ShardMap> get(const std::string& key) const;
  void erase(const std::string& key) { objects_.erase(key); }

  // Faults.
  int conflictNextWrites = 0;  // the next N writes answer Conflict (another writer won)
  bool failWrites = false;     // writes answer Unavailable (not applied)
  bool holdWrites = false;     // writes wait in `held` until released
  // Applied to every status written, as the API server prunes fields its CRD does not know.
  std::function<void(sharding::ShardMapStatus&)> prune;
  Duration latency = std::chrono::milliseconds(2);

  std::vector<std::function<void()>> held;
  int writes = 0;  // successful status writes
  std::vector<sharding::ShardMap> history;
  AfterEvent afterEvent;

 private:
  Scheduler& scheduler_;
  std::map<std::string, sharding::ShardMap> objects_;
  std::int64_t nextVersion_ = 1;
};

// What a stub pod does with a request of one kind.
enum class Fault {
  kNone,
  kError,         // answers 503 at once, does nothing
  kDropRequest,   // never arrives; the caller times out
  kDropResponse,  // arrives and is applied; the answer is lost, the caller times out
  kDelayRequest,  // arrives (and is applied) only after `delay`, after the caller timed out
};

// The app behind a stub pod: answers messages at once, stops entities after `stopLatency`.
class StubHost final : public sidecar::EntityHost {
 public:
  explicit StubHost(Scheduler& scheduler) : scheduler_(scheduler) {}
  void deliver(sidecar::Message message, sidecar::Epoch epoch,
               UniqueFunction<void(StatusOr<http::Response>&&)> done) override;
  void stop(const sidecar::EntityKey& key, sidecar::ShardId shard, std::uint64_t lastTurn,
            std::function<void(Status)> done) override;
  // Shards with at least one entity started and not yet stopped.
  std::set<sidecar::ShardId> activeShards() const;

  Duration stopLatency = std::chrono::milliseconds(5);
  // Entity ids whose stop fails (the app answers an error) until taken out of the set.
  std::set<std::string> failingStops;

 private:
  Scheduler& scheduler_;
  std::map<std::string, sidecar::ShardId> active_;  // entity id -> shard
};

struct StubPod {
  std::string name;
  std::string uid;
  std::string address;
  std::string version;
  std::string incarnation;  // its sidecar process: commands naming another are refused
  std::unique_ptr<StubHost> host;
  std::unique_ptr<sidecar::EntityRegistry> registry;
  bool alive = true;  // the process runs; a killed pod answers nothing and holds nothing
  Fault pingFault = Fault::kNone;
  Fault assignFault = Fault::kNone;
  Fault unassignFault = Fault::kNone;
  // kNone: the pod renews its ownership lease every third of it; anything else: it cannot
  // reach the manager (nor, in this harness, the API server), and its lease runs out.
  Fault renewFault = Fault::kNone;
  Duration delay = std::chrono::seconds(60);  // for kDelayRequest
  int pings = 0;
  int assigns = 0;
  int unassigns = 0;
  int refusedShards = 0;  // shards of assigns the registry refused as stale (fenced)
  bool reportsLoad = true;  // false: a sidecar of a release that does not measure load
  std::vector<protocol::ShardsRequest> assignLog;
  std::vector<protocol::ShardsRequest> unassignLog;  // every unassign sent to it

  // Shards this pod serves: owned while its lease runs, or with entities still running
  // (handing off, or stopping behind the lease's fence).
  std::set<sharding::ShardId> held() const;
};

class StubPods final : public PodClient {
 public:
  explicit StubPods(Scheduler& scheduler) : scheduler_(scheduler) {}

  StubPod& add(std::string name, std::string uid, std::string address, std::string version);
  StubPod* find(const std::string& name);
  StubPod* byAddress(const std::string& address);
  // The process dies: it answers nothing, its entities are gone.
  void kill(const std::string& name);
  std::vector<StubPod*> all();
  // Starts an entity on `shard` of `pod` (delivers one message).
  bool touch(const std::string& pod, sharding::ShardId shard, std::string id);

  void ping(const std::string& address, const std::string& shardMap, const protocol::Target& target,
            Duration timeout, PingCallback done) override;
  void assign(const std::string& address, const protocol::ShardsRequest& request,
              std::int32_t shardCount, Duration timeout, AssignCallback done) override;
  void unassign(const std::string& address, const protocol::ShardsRequest& request,
                Duration timeout, UnassignCallback done) override;
  void forget(const std::string& address) override { forgotten.insert(address); }

  Duration latency = std::chrono::milliseconds(1);
  Duration handoffTimeout = std::chrono::seconds(30);
  Duration ownershipLease = std::chrono::seconds(30);  // set on the registries of new pods
  std::set<std::string> forgotten;
  AfterEvent afterEvent;
  // What each shard costs (app seconds per second): the pod that owns it reports it in its ping
  // answer, as a sidecar does. Shards not listed cost nothing.
  std::map<sharding::ShardId, double> shardLoad;

 private:
  // Runs `apply` on the pod as `fault` says and answers through `answer`.
  template <typename T>
  void exchange(StubPod* pod, Fault fault, Duration timeout, std::function<T()> apply,
                std::function<void(T)> answer);

  Scheduler& scheduler_;
  std::map<std::string, std::unique_ptr<StubPod>> pods_;
};

class FakeDirectory final : public PodDirectory {
 public:
  explicit FakeDirectory(Scheduler& scheduler) : scheduler_(scheduler) {}

  std::optional<PodInfo> cached(const std::string& ns, const std::string& name) const override;
  std::vector<PodInfo> podsOf(const std::string& ns, const std::string& shardMap) const override;
  void fetch(const std::string& ns, const std::string& name, FetchCallback done) override;

  std::optional<PodInfo> finalState(const std::string& ns, const std::string& uid) const override;

  void put(PodInfo pod) { pods_[pod.name] = std::move(pod); }
  // The pod's object is gone after the kubelet reported every container terminated (a graceful
  // delete, or a crashed pod's cleanup): its final state confirms its end.
  void erase(const std::string& name);
  // The object is removed while its containers may still run (a force delete, a lost node's
  // pods): nothing confirms its end.
  void forceDelete(const std::string& name) { pods_.erase(name); }
  PodInfo* find(const std::string& name);

  bool failFetches = false;
  // When set, cached() answers from this stale snapshot instead (an informer lagging behind).
  std::optional<std::map<std::string, PodInfo>> staleCache;
  int fetches = 0;

 private:
  Scheduler& scheduler_;
  std::map<std::string, PodInfo> pods_;
  std::map<std::string, PodInfo> finals_;  // by uid
};

class FakeLeadership final : public Leadership {
 public:
  bool isLeader() const override { return leader; }
  std::string holder() const override { return holderName; }
  // A leader on `clock` renews the Lease all the time, unless `renewing` is false (frozen).
  std::optional<SteadyTime> lastRenewal() const override {
    if (leader && renewing && clock != nullptr) return clock->now();
    return renewedAt;
  }
  bool deposed() const override { return deposedFlag; }
  bool leader = true;
  std::string holderName;
  std::optional<SteadyTime> renewedAt;
  const Clock* clock = nullptr;
  bool renewing = true;
  bool deposedFlag = false;
};

class RecordingEvents final : public EventSink {
 public:
  struct Event {
    EventType type;
    std::string reason;
    std::string message;
  };
  void record(const sharding::ObjectMeta&, EventType type, std::string reason,
              std::string message) override {
    events.push_back({type, std::move(reason), std::move(message)});
  }
  int count(const std::string& reason) const;
  std::vector<Event> events;
};

}  // namespace kshard::manager::testing
