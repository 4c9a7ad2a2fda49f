#include "sidecar/map_watcher.h"

namespace kshard::sidecar {

MapWatcher::MapWatcher(kube::Client& api, Scheduler& scheduler, Random& random, Logger logger,
                       const Identity& self, MapApplier& applier, ManagerClient& manager,
                       RequestAuthorizer* operatorCheck)
    : log_(std::move(logger)),
      sync_(self, applier, manager, &api, operatorCheck, scheduler, random, log_) {
  kube::InformerOptions options;
  options.resource = kShardMapResource;
  options.ns = self.shardMap.ns;
  options.fieldSelector = "metadata.name=" + self.shardMap.name;
  options.resyncPeriod = std::chrono::seconds(30);
  options.transform = kube::stripManagedFields;
  options.metadataOnly = true;
  informer_ = std::make_unique<kube::Informer>(api, scheduler, random, log_, options);
  const std::string ref = self.shardMap.toString();
  const auto version = [](const nlohmann::json& o) {
    return o.value("/metadata/resourceVersion"_json_pointer, std::string());
  };
  informer_->addHandler(
      {.onAdd = [this, version](const nlohmann::json& o, bool) { sync_.announce(version(o)); },
       .onUpdate =
           [this, version](const nlohmann::json& before, const nlohmann::json& after) {
             // A resync hands the same version again: apply what is held once more.
             if (version(before) == version(after)) sync_.reapply();
             sync_.announce(version(after));
           },
       .onDelete =
           [this, ref](const nlohmann::json&, bool) {
             log_.warn("ShardMap deleted; keeping the last view until it is recreated",
                       {{"shard_map", ref}});
           }});
}

MapWatcher::~MapWatcher() { stop(); }

void MapWatcher::start() { informer_->start(); }

void MapWatcher::stop() {
  informer_->stop();
  sync_.stop();
}

}  // namespace kshard::sidecar
