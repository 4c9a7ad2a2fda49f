#include "sidecar/ownership_sync.h"

#include <vector>

namespace kshard::sidecar {

OwnershipSyncResult syncOwnership(const RoutingSnapshot& map, const protocol::Target& self,
                                  EntityRegistry& registry) {
  OwnershipSyncResult result;
  if (map.shardCount == 0) return result;
  const auto epoch = static_cast<Epoch>(map.epoch);

  for (ShardId s : registry.ownedShards()) {
    const RouteOwner* owner = map.ownerOf(s);
    if (owner == nullptr || owner->pod != self.pod || owner->uid != self.uid) {
      const auto before = registry.ownedEpoch(s);
      registry.revokeIfOlder(s, epoch);
      if (before && !registry.owns(s)) ++result.revoked;
    }
  }

  std::vector<ShardId> mine;
  for (ShardId s = 1; s <= map.shardCount; ++s) {
    const RouteOwner* owner = map.ownerOf(s);
    if (owner != nullptr && owner->pod == self.pod && owner->uid == self.uid &&
        owner->incarnation == self.incarnation && !registry.owns(s)) {
      mine.push_back(s);
    }
  }
  if (!mine.empty()) {
    const auto refused = registry.assign(mine, epoch, /*fromMap=*/true);
    result.adopted = mine.size() - refused.size();
  }
  return result;
}

}  // namespace kshard::sidecar
