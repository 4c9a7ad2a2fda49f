#include "tests/operator/fake_cluster.h"

#include <algorithm>

namespace kshard::manager::testing {
namespace {

std::string keyOf(const sharding::ObjectMeta& m) { return m.namespace_ + "/" + m.name; }

Logger silentLogger() {
  return Logger("stub-pod", LogLevel::kError, [](std::string_view) {});
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FakeStore

void FakeStore::load(const protocol::ShardMapRef& ref, Callback done) {
  scheduler_.runAfter(latency, [this, key = ref.toString(), done] {
    auto it = objects_.find(key);
    if (it == objects_.end()) {
      done(notFound("shardmaps " + key + " not found"));
      return;
    }
    done(it->second);
  });
}

void FakeStore::writeStatus(const sharding::ShardMap& map, Callback done) {
  auto task = [this, map, done] {
    if (failWrites) {
      done(unavailable("injected: the API server did not answer"));
      return;
    }
    auto it = objects_.find(keyOf(map.metadata));
    if (it == objects_.end()) {
      done(notFound("shardmaps " + keyOf(map.metadata) + " not found"));
      return;
    }
    if (conflictNextWrites > 0) {
      --conflictNextWrites;
      // Another writer got there first: the object moved on.
      it->second.metadata.resourceVersion = std::to_string(nextVersion_++);
      done(conflict("injected: the object has been modified"));
      return;
    }
    if (it->second.metadata.resourceVersion != map.metadata.resourceVersion) {
      done(
          conflict("the object has been modified; please apply your changes to the latest "
                   "version"));
      return;
    }
    it->second.status = map.status;
    if (prune) prune(it->second.status);
    it->second.metadata.resourceVersion = std::to_string(nextVersion_++);
    ++writes;
    history.push_back(it->second);
    if (afterEvent) afterEvent();
    done(it->second);
  };
  if (holdWrites) {
    held.push_back(task);
  } else {
    scheduler_.runAfter(latency, task);
  }
}

void FakeStore::put(sharding::ShardMap map) {
  const std::string key = keyOf(map.metadata);
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    map.metadata.generation = 1;
    if (map.metadata.uid.empty()) map.metadata.uid = "uid-" + key;
  } else if (!(it->second.spec == map.spec)) {
    map.metadata.generation = it->second.metadata.generation + 1;
  } else {
    map.metadata.generation = it->second.metadata.generation;
  }
  map.metadata.resourceVersion = std::to_string(nextVersion_++);
  objects_[key] = std::move(map);
}

std::optional<sharding::ShardMap> FakeStore::get(const std::string& key) const {
  auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

// ---------------------------------------------------------------------------------------------
// Stub pods

void StubHost::deliver(sidecar::Message message, sidecar::Epoch,
                       UniqueFunction<void(StatusOr<http::Response>&&)> done) {
  active_[message.key.id] = message.shard;
  done(http::Response{200, {}, "ok"});
}

void StubHost::stop(const sidecar::EntityKey& key, sidecar::ShardId, std::uint64_t,
                    std::function<void(Status)> done) {
  scheduler_.runAfter(stopLatency, [this, id = key.id, done] {
    if (failingStops.count(id)) {
      done(unavailable("injected: the app failed to stop entity " + id));
      return;
    }
    active_.erase(id);
    done({});
  });
}

std::set<sidecar::ShardId> StubHost::activeShards() const {
  std::set<sidecar::ShardId> out;
  for (const auto& [id, shard] : active_) out.insert(shard);
  return out;
}

std::set<sharding::ShardId> StubPod::held() const {
  std::set<sharding::ShardId> out;
  if (!alive) return out;
  if (registry->leaseValid()) {
    for (auto s : registry->ownedShards()) out.insert(s);
  }
  for (auto s : host->activeShards()) out.insert(s);
  return out;
}

StubPod& StubPods::add(std::string name, std::string uid, std::string address,
                       std::string version) {
  auto pod = std::make_unique<StubPod>();
  pod->name = std::move(name);
  pod->uid = std::move(uid);
  pod->address = std::move(address);
  pod->version = std::move(version);
  pod->incarnation = "inc-" + pod->name;
  pod->host = std::make_unique<StubHost>(scheduler_);
  sidecar::EntityRegistryOptions options;
  options.idleTimeout = Duration{0};  // entities stay until their shard moves
  pod->registry =
      std::make_unique<sidecar::EntityRegistry>(*pod->host, scheduler_, options, silentLogger());
  pod->registry->setLeaseDuration(ownershipLease);
  StubPod& ref = *pod;
  pods_[ref.name] = std::move(pod);
  return ref;
}

StubPod* StubPods::find(const std::string& name) {
  auto it = pods_.find(name);
  return it == pods_.end() ? nullptr : it->second.get();
}

StubPod* StubPods::byAddress(const std::string& address) {
  for (auto& [name, pod] : pods_) {
    if (pod->alive && pod->address == address) return pod.get();
  }
  return nullptr;
}

void StubPods::kill(const std::string& name) {
  StubPod* pod = find(name);
  if (pod == nullptr) return;
  pod->alive = false;
}

std::vector<StubPod*> StubPods::all() {
  std::vector<StubPod*> out;
  for (auto& [name, pod] : pods_) out.push_back(pod.get());
  return out;
}

bool StubPods::touch(const std::string& podName, sharding::ShardId shard, std::string id) {
  StubPod* pod = find(podName);
  if (pod == nullptr || !pod->alive || !pod->registry->owns(shard)) return false;
  sidecar::Message m;
  m.key = {"entity", std::move(id)};
  m.shard = shard;
  m.mode = sidecar::DeliveryMode::kTell;
  pod->registry->deliver(std::move(m), [](sidecar::DeliveryOutcome) {});
  return true;
}

template <typename T>
void StubPods::exchange(StubPod* pod, Fault fault, Duration timeout, std::function<T()> apply,
                        std::function<void(T)> answer) {
  auto timedOut = [answer] { answer(T(deadlineExceeded("injected: no answer in time"))); };
  if (pod == nullptr) {
    scheduler_.runAfter(timeout, timedOut);
    return;
  }
  auto applyIfAlive = [this, pod, apply]() -> std::optional<T> {
    if (!pod->alive) return std::nullopt;
    T result = apply();
    if (afterEvent) afterEvent();
    return result;
  };
  switch (fault) {
    case Fault::kNone:
      scheduler_.runAfter(latency, [this, applyIfAlive, answer, timedOut, timeout] {
        auto result = applyIfAlive();
        if (!result) {
          scheduler_.runAfter(timeout, timedOut);
          return;
        }
        scheduler_.runAfter(latency, [answer, r = std::move(*result)] { answer(r); });
      });
      return;
    case Fault::kError:
      scheduler_.runAfter(latency,
                          [answer] { answer(T(unavailable("injected: HTTP 503 from the pod"))); });
      return;
    case Fault::kDropRequest:
      scheduler_.runAfter(timeout, timedOut);
      return;
    case Fault::kDropResponse:
      scheduler_.runAfter(latency, [applyIfAlive] { (void)applyIfAlive(); });
      scheduler_.runAfter(timeout, timedOut);
      return;
    case Fault::kDelayRequest:
      scheduler_.runAfter(pod->delay, [applyIfAlive] { (void)applyIfAlive(); });
      scheduler_.runAfter(timeout, timedOut);
      return;
  }
}

namespace {

// What the sidecar answers a command meant for another pod or sidecar process: 409 WrongTarget.
std::optional<Status> wrongTarget(const StubPod& pod, const protocol::Target& target) {
  if (target == protocol::Target{pod.name, pod.uid, pod.incarnation}) return std::nullopt;
  return failedPrecondition("HTTP 409 WrongTarget: this sidecar is " + pod.name + "/" + pod.uid +
                            "/" + pod.incarnation);
}

}  // namespace

void StubPods::ping(const std::string& address, const std::string& /*shardMap*/,
                    const protocol::Target& target, Duration timeout, PingCallback done) {
  StubPod* pod = byAddress(address);
  if (pod != nullptr) ++pod->pings;
  exchange<StatusOr<protocol::PingResponse>>(
      pod, pod ? pod->pingFault : Fault::kNone, timeout,
      [this, pod, target]() -> StatusOr<protocol::PingResponse> {
        if (auto refused = wrongTarget(*pod, target)) return *refused;
        protocol::PingResponse r;
        r.pod = pod->name;
        r.uid = pod->uid;
        r.incarnation = pod->incarnation;
        std::vector<sharding::ShardId> owned;
        if (pod->reportsLoad) r.load.emplace();
        for (auto s : pod->registry->ownedShards()) {
          owned.push_back(s);
          r.epoch = std::max(r.epoch, pod->registry->ownedEpoch(s).value_or(0));
          if (auto l = shardLoad.find(s); l != shardLoad.end() && r.load) {
            r.load->emplace_back(s, l->second);
          }
        }
        r.shards = sharding::ShardSet::of(owned).toString();
        return r;
      },
      std::move(done));
}

void StubPods::assign(const std::string& address, const protocol::ShardsRequest& request,
                      std::int32_t, Duration timeout, AssignCallback done) {
  StubPod* pod = byAddress(address);
  if (pod != nullptr) ++pod->assigns;
  exchange<StatusOr<protocol::AssignResponse>>(
      pod, pod ? pod->assignFault : Fault::kNone, timeout,
      [pod, request]() -> StatusOr<protocol::AssignResponse> {
        if (auto refused = wrongTarget(*pod, request.target)) return *refused;
        pod->assignLog.push_back(request);
        std::vector<sharding::ShardId> shards;
        request.shards.forEach([&](sharding::ShardId s) { shards.push_back(s); });
        auto refused = pod->registry->assign(shards, request.epoch);
        pod->refusedShards += static_cast<int>(refused.size());
        return protocol::AssignResponse{sharding::ShardSet::of(refused)};
      },
      std::move(done));
}

void StubPods::unassign(const std::string& address, const protocol::ShardsRequest& request,
                        Duration timeout, UnassignCallback done) {
  StubPod* pod = byAddress(address);
  if (pod != nullptr) {
    ++pod->unassigns;
    pod->unassignLog.push_back(request);
  }
  const Fault fault = pod ? pod->unassignFault : Fault::kNone;
  if (pod == nullptr || fault != Fault::kNone) {
    // Faults answer like the other calls; the pod's handoff (if the request arrives) runs in the
    // background.
    exchange<Status>(
        pod, fault, timeout,
        [this, pod, request]() -> Status {
          if (auto refused = wrongTarget(*pod, request.target)) return *refused;
          std::vector<sharding::ShardId> shards;
          request.shards.forEach([&](sharding::ShardId s) { shards.push_back(s); });
          pod->registry->unassign(shards, request.epoch, handoffTimeout, [](auto) {});
          return {};
        },
        [done](Status s) {
          done({std::move(s), {}});
        });
    return;
  }
  // The answer comes when the handoff finished (or its deadline passed), as the sidecar does.
  scheduler_.runAfter(latency, [this, pod, request, done, timeout] {
    if (!pod->alive) {
      scheduler_.runAfter(timeout, [done] { done({deadlineExceeded("injected: no answer"), {}}); });
      return;
    }
    if (auto refused = wrongTarget(*pod, request.target)) {
      scheduler_.runAfter(latency, [done, r = *refused] { done({r, {}}); });
      return;
    }
    std::vector<sharding::ShardId> shards;
    request.shards.forEach([&](sharding::ShardId s) { shards.push_back(s); });
    pod->registry->unassign(
        shards, request.epoch, handoffTimeout,
        [this, pod, done](std::vector<sidecar::ShardId> busy) {
          if (afterEvent) afterEvent();
          UnassignAnswer result;
          if (!busy.empty()) {
            result.status = deadlineExceeded("HandoffTimeout: shards still busy: " +
                                             sharding::ShardSet::of(busy).toString());
            result.busy.assign(busy.begin(), busy.end());
          }
          scheduler_.runAfter(latency, [pod, done, result] {
            if (!pod->alive) return;
            done(result);
          });
        });
    if (afterEvent) afterEvent();
  });
}

// ---------------------------------------------------------------------------------------------
// Directory, events

std::optional<PodInfo> FakeDirectory::cached(const std::string&, const std::string& name) const {
  const auto& source = staleCache ? *staleCache : pods_;
  auto it = source.find(name);
  if (it == source.end()) return std::nullopt;
  return it->second;
}

std::vector<PodInfo> FakeDirectory::podsOf(const std::string&, const std::string& shardMap) const {
  std::vector<PodInfo> out;
  for (const auto& [name, pod] : staleCache ? *staleCache : pods_) {
    auto label = pod.labels.find(kShardMapLabel);
    if (label != pod.labels.end() && label->second == shardMap) out.push_back(pod);
  }
  return out;
}

void FakeDirectory::fetch(const std::string&, const std::string& name, FetchCallback done) {
  ++fetches;
  scheduler_.runAfter(std::chrono::milliseconds(1), [this, name, done] {
    if (failFetches) {
      done(unavailable("injected: the API server did not answer"));
      return;
    }
    auto it = pods_.find(name);
    if (it == pods_.end()) {
      done(std::optional<PodInfo>());
      return;
    }
    done(std::optional<PodInfo>(it->second));
  });
}

std::optional<PodInfo> FakeDirectory::finalState(const std::string&, const std::string& uid) const {
  auto it = finals_.find(uid);
  if (it == finals_.end()) return std::nullopt;
  return it->second;
}

void FakeDirectory::erase(const std::string& name) {
  auto it = pods_.find(name);
  if (it == pods_.end()) return;
  PodInfo last = std::move(it->second);
  last.terminating = true;
  last.containersTerminated = true;
  finals_[last.uid] = std::move(last);
  pods_.erase(it);
}

PodInfo* FakeDirectory::find(const std::string& name) {
  auto it = pods_.find(name);
  return it == pods_.end() ? nullptr : &it->second;
}

int RecordingEvents::count(const std::string& reason) const {
  return static_cast<int>(std::count_if(events.begin(), events.end(),
                                        [&](const Event& e) { return e.reason == reason; }));
}

}  // namespace kshard::manager::testing
