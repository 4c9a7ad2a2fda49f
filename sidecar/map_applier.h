// MapApplier: applies one version of the ShardMap, from whichever source delivered it (the
// Kubernetes watch or the operator's assignments endpoint), to the routing table and to this
// pod's ownership (see syncOwnership).
//
// A map that does not decode is logged and ignored: the previous view stays in use, and while
// no source is reachable the cached view keeps routing messages.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/logger.h"
#include "sharding/shard_map.h"
#include "sidecar/entity_registry.h"
#include "sidecar/identity.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

class MapApplier {
 public:
  // Told each version's ShardMap before this pod's ownership follows it (the remembered entity
  // types must be known before a shard the map gives this pod is taken).
  using SpecListener = std::function<void(const sharding::ShardMap&)>;

  MapApplier(Identity self, RoutingTable& table, EntityRegistry& registry, Logger logger,
             SpecListener onSpec = nullptr);

  // Thread-safe; versions are applied one at a time.
  void apply(const nlohmann::json& object);
  // The same, for a map already decoded.
  void apply(const sharding::ShardMap& map);
  // Waits (real time) until a map has been applied. False on timeout.
  bool waitForMap(std::chrono::milliseconds timeout);
  bool haveMap() const;

 private:
  Identity self_;
  RoutingTable& table_;
  EntityRegistry& registry_;
  Logger log_;
  SpecListener onSpec_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool haveMap_ = false;
};

}  // namespace kshard::sidecar
