// EventSink: Kubernetes Events about a ShardMap, for what a user should see in
// `kubectl describe shardmap` (rebalances, refused registrations, pods declared dead). Logs are
// for the operator's operator; Events are for the app's owner.
#pragma once

#include <string>

#include "sharding/shard_map.h"

namespace kshard::manager {

enum class EventType { kNormal, kWarning };

class EventSink {
 public:
  virtual ~EventSink() = default;
  // `reason` is CamelCase ("Rebalanced"); `message` a sentence. Never blocks; best effort.
  virtual void record(const sharding::ObjectMeta& object, EventType type, std::string reason,
                      std::string message) = 0;
};

}  // namespace kshard::manager
