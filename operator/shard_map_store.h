// ShardMapStore: where the operator reads ShardMaps and persists their status (the Kubernetes API
// in production, memory in tests).
//
// Every status write carries the resourceVersion the operator read; a store whose object has moved
// on answers Conflict and writes nothing. That is what fences a deposed leader, and why a
// rebalance round that gets Conflict aborts instead of assigning (epoch rule 6).
#pragma once

#include <functional>

#include "base/status.h"
#include "protocol/wire.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

class ShardMapStore {
 public:
  using Callback = std::function<void(StatusOr<sharding::ShardMap>)>;

  virtual ~ShardMapStore() = default;
  // A fresh (quorum) read. NotFound when the ShardMap does not exist.
  virtual void load(const protocol::ShardMapRef& ref, Callback done) = 0;
  // Replaces the status of `map` if its metadata.resourceVersion is still current; answers the
  // object as stored (with its new resourceVersion). Conflict when it is not current, NotFound
  // when the object is gone. `done` runs exactly once, on any thread, possibly inline.
  virtual void writeStatus(const sharding::ShardMap& map, Callback done) = 0;
};

}  // namespace kshard::manager
