#include "sidecar/map_watcher.h"

namespace kshard::sidecar {

MapWatcher::MapWatcher(kube::Client& api, Scheduler& scheduler, Random& random, Logger logger,
                       const Identity& self, MapApplier& applier)
    : log_(std::move(logger)) {
  kube::InformerOptions options;
  options.resource = kShardMapResource;
  options.ns = self.shardMap.ns;
  options.fieldSelector = "metadata.name=" + self.shardMap.name;
  options.resyncPeriod = std::chrono::seconds(30);
  options.transform = kube::stripManagedFields;
  informer_ = std::make_unique<kube::Informer>(api, scheduler, random, log_, options);
  const std::string ref = self.shardMap.toString();
  informer_->addHandler(
      {.onAdd = [&applier](const nlohmann::json& o, bool) { applier.apply(o); },
       .onUpdate = [&applier](const nlohmann::json&, const nlohmann::json& o) { applier.apply(o); },
       .onDelete =
           [this, ref](const nlohmann::json&, bool) {
             log_.warn("ShardMap deleted; keeping the last view until it is recreated",
                       {{"shard_map", ref}});
           }});
}

MapWatcher::~MapWatcher() { stop(); }

void MapWatcher::start() { informer_->start(); }

void MapWatcher::stop() { informer_->stop(); }

}  // namespace kshard::sidecar
