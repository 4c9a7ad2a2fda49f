#include "sidecar/routing_table.h"

#include <string_view>
#include <unordered_map>

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
  for (const auto& p : map.status.pods) next->pods.push_back({p.name, p.uid, p.address});
  // Pod names are unique in a valid status (shardTableFromStatus checked it): name -> uid, so
  // that finding who left costs one lookup per pod, not a scan of every pod.
  std::unordered_map<std::string_view, std::string_view> uidOf;
  uidOf.reserve(next->pods.size());
  for (const RouteOwner& p : next->pods) uidOf.emplace(p.pod, p.uid);
  const auto listed = [&](const std::string& pod, const std::string& uid) {
    const auto it = uidOf.find(pod);
    return it != uidOf.end() && it->second == uid;
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
