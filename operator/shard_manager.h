// ShardManager: the operator's set of ShardMapControllers, one per ShardMap it sees, and where
// informer events, leadership changes and manager API calls are routed to them.
//
// Controllers are created when the ShardMap informer reports an object and shut down when it
// reports the deletion; while this replica leads, every controller leads. Thread-safe: informer
// handlers, the elector and HTTP handlers call in from their own threads.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "operator/shard_map_controller.h"

namespace kshard::manager {

class ShardManager {
 public:
  // `deps` is shared by every controller (its logger gets a shard_map field per controller).
  explicit ShardManager(ControllerDeps deps);
  ~ShardManager();  // not copyable or movable: it holds a mutex

  // ShardMap informer: an object was added or changed / was deleted.
  void upsert(sharding::ShardMap map);
  void remove(const protocol::ShardMapRef& ref);
  // Pod informer: a pod labelled kshard.io/shard-map=<shardMap> changed or was deleted.
  void podChanged(const std::string& ns, const std::string& shardMap, const std::string& pod);

  void startLeading();
  void stopLeading();
  bool leading() const;

  // Null when no such ShardMap is known.
  std::shared_ptr<ShardMapController> find(const protocol::ShardMapRef& ref) const;
  std::vector<protocol::ShardMapRef> shardMaps() const;
  // The leader's manager address as stored in the map's status.manager, when it names the
  // current lease holder; empty otherwise.
  std::string leaderAddress(const protocol::ShardMapRef& ref) const;

  // Shuts every controller down (the operator is stopping).
  void shutdown();

 private:
  ControllerDeps deps_;
  mutable std::mutex mu_;
  bool leading_ = false;
  std::map<std::string, std::shared_ptr<ShardMapController>> controllers_;  // "{ns}/{name}"
  std::map<std::string, std::string> uids_;  // "{ns}/{name}" -> the uid its controller serves
};

}  // namespace kshard::manager
