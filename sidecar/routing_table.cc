#include "sidecar/routing_table.h"

#include <string_view>

namespace kshard::sidecar {
namespace {

// How long a departed pod is remembered; the peer API accepts its forwards for 2 × sendTimeout.
constexpr auto kDepartedKept = std::chrono::minutes(5);

}  // namespace

const RouteOwner* RoutingSnapshot::ownerOf(std::int32_t shard) const {
  if (shard < 1 || shard > shardCount) return nullptr;
  const sharding::PodIndex p = owners[static_cast<std::size_t>(shard - 1)];
  if (p == sharding::kNoPod) return nullptr;
  return &pods[static_cast<std::size_t>(p)];
}

const RouteOwner* RoutingSnapshot::podNamed(std::string_view name) const {
  const auto it = podIndex.find(name);
  return it == podIndex.end() ? nullptr : &pods[static_cast<std::size_t>(it->second)];
}

bool RoutingTable::update(const sharding::ShardMap& map) {
  auto table = sharding::shardTableFromStatus(map.status, map.spec.shards);
  if (!table.ok()) return false;
  auto next = std::make_shared<RoutingSnapshot>();
  next->spec = map.spec;
  next->shardCount = map.spec.shards;
  next->epoch = map.status.epoch;
  next->manager = map.status.manager;
  next->owners.assign(table->owners().begin(), table->owners().end());
  next->pods.reserve(map.status.pods.size());
  for (const auto& p : map.status.pods) {
    next->pods.push_back({p.name, p.uid, p.address, p.incarnation});
  }
  // Pod names are unique in a valid status (shardTableFromStatus checked it), so finding a pod
  // by name (who left, below; who forwards, in the peer API's authorization) is one lookup, not
  // a scan of every pod.
  for (std::size_t i = 0; i < next->pods.size(); ++i) {
    next->podIndex.emplace(next->pods[i].pod, static_cast<sharding::PodIndex>(i));
  }
  const auto listed = [&](const std::string& pod, const std::string& uid) {
    const RouteOwner* p = next->podNamed(pod);
    return p != nullptr && p->uid == uid;
  };

  std::lock_guard lock(mu_);
  if (current_->shardCount != 0 && next->epoch < current_->epoch) return false;
  const SteadyTime now = clock_.now();
  for (const DepartedPod& d : current_->departed) {
    if (now - d.at < kDepartedKept && !listed(d.pod, d.uid)) next->departed.push_back(d);
  }
  for (const RouteOwner& p : current_->pods) {
    if (!listed(p.pod, p.uid)) next->departed.push_back({p.pod, p.uid, now});
  }
  current_ = std::move(next);
  return true;
}

std::shared_ptr<const RoutingSnapshot> RoutingTable::snapshot() const {
  std::lock_guard lock(mu_);
  return current_;
}

}  // namespace kshard::sidecar
