// syncOwnership: brings this pod's shard ownership in line with the ShardMap it watches.
//
// The operator tells pods about ownership directly (assign/unassign), and also persists it in the
// ShardMap before any assign (write-ahead). The watched map is therefore a second, later channel
// for the same truth, which covers lost or timed-out direct calls:
// - a shard this pod holds that the map, at a newer epoch, gives to another pod (or leaves
//   unassigned) is released at once: the operator only does that after this pod acknowledged an
//   unassign or when it considers this pod dead, so continuing to serve it risks two owners;
// - a shard the map gives to this pod (same name and uid) and to this sidecar process (same
//   incarnation) that it does not hold is taken at the map's epoch; the registry's epoch fences
//   refuse it if an unassign at a newer epoch was seen. A map that names an earlier incarnation
//   is not taken: the app dropped that process's entities (AppHost::reset), and the operator
//   assigns the shards anew once this process has registered.
#pragma once

#include <cstddef>
#include <string_view>

#include "sidecar/entity_registry.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

struct OwnershipSyncResult {
  std::size_t revoked = 0;
  std::size_t adopted = 0;
};

OwnershipSyncResult syncOwnership(const RoutingSnapshot& map, const protocol::Target& self,
                                  EntityRegistry& registry);

}  // namespace kshard::sidecar
