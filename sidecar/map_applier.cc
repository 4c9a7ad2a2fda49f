#include "sidecar/map_applier.h"

#include "sharding/shard_map_json.h"
#include "sidecar/ownership_sync.h"

namespace kshard::sidecar {

MapApplier::MapApplier(Identity self, RoutingTable& table, EntityRegistry& registry, Logger logger,
                       SpecListener onSpec)
    : self_(std::move(self)),
      table_(table),
      registry_(registry),
      log_(std::move(logger)),
      onSpec_(std::move(onSpec)) {}

void MapApplier::apply(const nlohmann::json& object) {
  auto map = sharding::shardMapFromJson(object);
  if (!map.ok()) {
    log_.error("ShardMap does not decode; keeping the previous view",
               {{"shard_map", self_.shardMap.toString()}, {"error", map.status().toString()}});
    return;
  }
  apply(*map);
}

void MapApplier::apply(const sharding::ShardMap& map) {
  std::unique_lock lock(mu_);
  if (!table_.update(map)) {
    log_.debug("ShardMap version not applied (older epoch or inconsistent)",
               {{"epoch", map.status.epoch}});
  }
  registry_.setIdleTimeout(map.spec.entityIdleTimeout);
  registry_.setMaxActiveEntities(static_cast<std::size_t>(map.spec.maxActiveEntitiesPerPod));
  registry_.setLeaseDuration(map.spec.ownershipLease);
  if (onSpec_) onSpec_(map);
  const auto result = syncOwnership(*table_.snapshot(), self_.target(), registry_);
  if (result.revoked || result.adopted) {
    log_.info("ownership synced from the ShardMap",
              {{"epoch", map.status.epoch},
               {"revoked", static_cast<std::uint64_t>(result.revoked)},
               {"adopted", static_cast<std::uint64_t>(result.adopted)}});
  }
  if (!haveMap_) {
    haveMap_ = true;
    log_.info("ShardMap loaded", {{"shard_map", self_.shardMap.toString()},
                                  {"shards", map.spec.shards},
                                  {"epoch", map.status.epoch}});
  }
  lock.unlock();
  cv_.notify_all();
}

bool MapApplier::waitForMap(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return haveMap_; });
}

bool MapApplier::haveMap() const {
  std::lock_guard lock(mu_);
  return haveMap_;
}

}  // namespace kshard::sidecar
