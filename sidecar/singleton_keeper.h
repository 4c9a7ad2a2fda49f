// SingletonKeeper: keeps this pod's singletons (spec.singletons) running.
//
// A singleton named S is the entity {kSingletonEntityType, S} on the shard of S
// (sharding::shardIdOf). It runs where that shard is owned, and nowhere else: the keeper asks the
// registry to keep it active (EntityRegistry::keepActive) when the spec lists it and each time
// this pod takes shards (a shards-taken listener), and the registry starts it only while it owns
// the shard. So a singleton moves with its shard's unassign-before-assign handoff and epoch
// fencing, and is stopped on the old owner before it starts on the new one.
//
// A singleton removed from the spec is stopped at once (after its current turn): it is no longer
// part of the app, and idle passivation may be off (entityIdleTimeout 0).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/logger.h"
#include "sidecar/entity_registry.h"

namespace kshard::sidecar {

class SingletonKeeper {
 public:
  // Adds its listener to `registry`; construct before the registry is used.
  SingletonKeeper(EntityRegistry& registry, Logger logger);

  // The spec's singletons and shard count (each version of the ShardMap): starts those whose
  // shard this pod owns, stops those no longer listed. Thread-safe.
  void update(const std::vector<std::string>& names, std::int32_t shardCount);

  // Whether the spec (as last updated) lists `name`.
  bool declared(const std::string& name) const;

 private:
  struct Singleton {
    std::string name;
    ShardId shard = 0;
  };
  void onShardsTaken(const std::vector<ShardId>& shards);
  void keep(const std::vector<Singleton>& singletons);

  EntityRegistry& registry_;
  Logger log_;
  mutable std::mutex mu_;
  std::vector<Singleton> singletons_;  // under mu_
};

// The entity that runs the singleton `name`.
inline EntityKey singletonKey(std::string name) {
  return EntityKey{std::string(kSingletonEntityType), std::move(name)};
}

}  // namespace kshard::sidecar
