#include "sidecar/singleton_keeper.h"

#include <algorithm>

#include "sharding/shard_id.h"

namespace kshard::sidecar {

SingletonKeeper::SingletonKeeper(EntityRegistry& registry, Logger logger)
    : registry_(registry), log_(std::move(logger)) {
  registry_.addShardsTakenListener(
      [this](std::vector<ShardId> shards, Epoch) { onShardsTaken(shards); });
}

void SingletonKeeper::update(const std::vector<std::string>& names, std::int32_t shardCount) {
  std::vector<Singleton> next;
  for (const auto& name : names) {
    auto shard = sharding::shardIdOf(name, shardCount);
    if (!shard.ok()) {
      log_.error("singleton has no shard",
                 {{"singleton", name}, {"error", shard.status().toString()}});
      continue;
    }
    next.push_back({name, *shard});
  }
  std::vector<Singleton> removed;
  {
    std::lock_guard lock(mu_);
    for (const auto& s : singletons_) {
      const bool kept = std::any_of(next.begin(), next.end(),
                                    [&](const Singleton& n) { return n.name == s.name; });
      if (!kept) removed.push_back(s);
    }
    singletons_ = next;
  }
  // Outside mu_: the registry calls listeners (and so onShardsTaken) under no lock of its own,
  // and the keeper's lock is never held while it calls the registry.
  for (const auto& s : removed) {
    log_.info("singleton removed from the ShardMap; stopping it", {{"singleton", s.name}});
    registry_.unpin(singletonKey(s.name), true);
  }
  keep(next);
}

bool SingletonKeeper::declared(const std::string& name) const {
  std::lock_guard lock(mu_);
  return std::any_of(singletons_.begin(), singletons_.end(),
                     [&](const Singleton& s) { return s.name == name; });
}

void SingletonKeeper::onShardsTaken(const std::vector<ShardId>& shards) {
  std::vector<Singleton> taken;
  {
    std::lock_guard lock(mu_);
    for (const auto& s : singletons_) {
      if (std::binary_search(shards.begin(), shards.end(), s.shard)) taken.push_back(s);
    }
  }
  keep(taken);
}

void SingletonKeeper::keep(const std::vector<Singleton>& singletons) {
  // keepActive does nothing for a shard this pod does not own (or may not run entities of now).
  for (const auto& s : singletons) {
    if (registry_.keepActive(singletonKey(s.name), s.shard)) {
      log_.debug("singleton kept active", {{"singleton", s.name}, {"shard", s.shard}});
    }
  }
}

}  // namespace kshard::sidecar
