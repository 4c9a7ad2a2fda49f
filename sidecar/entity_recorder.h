// EntityRecorder: where the registry records the active set of remembered entity types
// (spec.rememberedEntityTypes), so that the next owner of a shard starts them again without
// waiting for a message (EntityRegistry::keepActive, from a shards-taken listener).
//
// The registry calls it at two points of an entity's life:
//   - started: before the first turn of a new entity of a remembered type that a message
//     started (or restarted after it was forgotten). The turn reaches the app only after
//     done(OK). On an error its waiting messages are refused (kNotOwned, or kRememberedFull for
//     ResourceExhausted: asks are retried by their sender, and tells taken meanwhile were not yet
//     answered 202, so they are refused and retried as well; no tell already answered 202 ever
//     waits for a record) and the entity is dropped, unless the app may still hold it (its stop
//     failed): it then stays until a stop succeeds. An entity started by keepActive is already
//     recorded: no call.
//   - forgotten: the app asked to passivate the entity (Kshard-Passivate: true), once no message
//     waits for it, before its stop callback. On an error the entity stays active (and recorded).
// A call not answered within EntityRegistryOptions::recorderTimeout counts as failed, and its
// late answer is ignored.
// A handoff, the drain or the lease's fence stop an entity without forgetting it: it stays
// recorded and runs again on the shard's next owner.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "sidecar/entity_registry.h"

namespace kshard::sidecar {

class EntityRecorder {
 public:
  virtual ~EntityRecorder() = default;
  // Whether `type` is remembered. Called under the registry's lock, for each new entity: quick,
  // and no call back into the registry.
  virtual bool remembered(const std::string& type) = 0;
  // Called under no lock; `done` exactly once, from any thread (it may call the registry).
  // `epoch`: this pod's epoch of `shard` when called.
  virtual void started(const EntityKey& key, ShardId shard, Epoch epoch,
                       std::function<void(Status)> done) = 0;
  virtual void forgotten(const EntityKey& key, ShardId shard, Epoch epoch,
                         std::function<void(Status)> done) = 0;
};

}  // namespace kshard::sidecar
