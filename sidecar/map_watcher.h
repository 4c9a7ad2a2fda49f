// MapWatcher: the production source of the sidecar's ShardMap: a watch of that one object's
// metadata through the Kubernetes API (field selector on its name), which tells MapSync of each
// new version (MapSync then reads what changed from the manager), with a periodic resync that
// re-applies the version held, which repairs ownership if a direct call from the operator was
// lost.
#pragma once

#include <memory>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "sidecar/identity.h"
#include "sidecar/map_applier.h"
#include "sidecar/map_sync.h"

namespace kshard::sidecar {

inline const kube::ResourceRef& kShardMapResource = kube::resources::kShardMaps;

class MapWatcher {
 public:
  MapWatcher(kube::Client& api, Scheduler& scheduler, Random& random, Logger logger,
             const Identity& self, MapApplier& applier, ManagerClient& manager,
             RequestAuthorizer* operatorCheck);
  ~MapWatcher();

  void start();
  void stop();
  MapSyncStats stats() const { return sync_.stats(); }

 private:
  Logger log_;
  MapSync sync_;
  std::unique_ptr<kube::Informer> informer_;
};

}  // namespace kshard::sidecar
