// The operator's interfaces implemented on kube/ (the ShardMap store is in
// operator/kube_shard_map_store.h): the pod directory (the pod informer's cache, GET when in
// doubt), leadership (the Lease elector) and the Event sink (the events.k8s.io recorder).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/resource.h"
#include "operator/event_sink.h"
#include "operator/leadership.h"
#include "operator/pod_directory.h"
#include "operator/kube_shard_map_store.h"

namespace kshard::manager {

class KubePodDirectory final : public PodDirectory {
 public:
  // `pods` is the informer on pods labelled kshard.io/shard-map.
  KubePodDirectory(kube::Client& api, const kube::Informer& pods, const Clock& clock)
      : api_(api), pods_(pods), clock_(clock) {}
  std::optional<PodInfo> cached(const std::string& ns, const std::string& name) const override;
  std::vector<PodInfo> podsOf(const std::string& ns, const std::string& shardMap) const override;
  void fetch(const std::string& ns, const std::string& name, FetchCallback done) override;
  std::optional<PodInfo> finalState(const std::string& ns, const std::string& uid) const override;

  // The pod informer's delete handler: `last` is the object's final state unless
  // `finalStateUnknown` (a relist found it gone).
  void deleted(const nlohmann::json& last, bool finalStateUnknown);

 private:
  kube::Client& api_;
  const kube::Informer& pods_;
  const Clock& clock_;
  struct Tombstone {
    PodInfo last;
    SteadyTime at;
  };
  mutable std::mutex mu_;
  std::map<std::string, Tombstone> tombstones_;  // "{ns}/{uid}", pruned after an hour
};

// Leadership as the Lease elector reports it through its callbacks: onStartedLeading sets it,
// onStoppedLeading (which the elector calls at its renew deadline, before anyone else may take
// the Lease) clears it before the controllers are told. Kept apart from the elector so that it
// can outlive it: the elector is destroyed first and no callback runs into a destroyed manager.
class LeaseLeadership final : public Leadership {
 public:
  explicit LeaseLeadership(std::string identity) : identity_(std::move(identity)) {}
  bool isLeader() const override { return leading_.load(); }
  std::string holder() const override {
    std::lock_guard lock(mu_);
    return holder_;
  }
  std::optional<SteadyTime> lastRenewal() const override {
    std::lock_guard lock(mu_);
    return lastRenewal_;
  }
  bool deposed() const override {
    std::lock_guard lock(mu_);
    return deposed_;
  }
  void setLeading(bool leading) { leading_.store(leading); }
  void setHolder(std::string holder) {
    std::lock_guard lock(mu_);
    if (!holder.empty() && holder != identity_) deposed_ = true;
    holder_ = std::move(holder);
  }
  void setRenewed(SteadyTime at) {
    std::lock_guard lock(mu_);
    lastRenewal_ = at;
    deposed_ = false;
  }

 private:
  const std::string identity_;
  std::atomic<bool> leading_{false};
  mutable std::mutex mu_;
  std::string holder_;
  std::optional<SteadyTime> lastRenewal_;
  bool deposed_ = false;
};

class KubeEventSink final : public EventSink {
 public:
  explicit KubeEventSink(kube::EventRecorder& recorder) : recorder_(recorder) {}
  void record(const sharding::ObjectMeta& object, EventType type, std::string reason,
              std::string message) override;

 private:
  kube::EventRecorder& recorder_;
};

}  // namespace kshard::manager
