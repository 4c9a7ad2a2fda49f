// MapWatcher: the production source of the sidecar's ShardMap: a watch on that one object
// through the Kubernetes API (field selector on its name), with a periodic resync that re-applies
// it, which repairs ownership if a direct call from the operator was lost.
#pragma once

#include <memory>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "sidecar/identity.h"
#include "sidecar/map_applier.h"

namespace kshard::sidecar {

inline const kube::ResourceRef& kShardMapResource = kube::resources::kShardMaps;

class MapWatcher {
 public:
  MapWatcher(kube::Client& api, Scheduler& scheduler, Random& random, Logger logger,
             const Identity& self, MapApplier& applier);
  ~MapWatcher();

  void start();
  void stop();

 private:
  Logger log_;
  std::unique_ptr<kube::Informer> informer_;
};

}  // namespace kshard::sidecar
