// ControllerOperation: the base of the parts of a ShardMapController that carry out its
// operations (Takeover, RoundRunner, Registration, Unregistration; shard_map_controller.h). Each
// works with the same three things, all owned by the controller and outliving the part: the
// map's state, the queue its operations run in, and the pods' health.
#pragma once

#include "operator/controller_context.h"
#include "operator/operation_queue.h"
#include "operator/pod_health_monitor.h"

namespace kshard::manager {

class ControllerOperation {
 public:
  ControllerOperation(ControllerContext& c, OperationQueue& queue, PodHealthMonitor& health)
      : c_(c), queue_(queue), health_(health) {}

 protected:
  ~ControllerOperation() = default;

  ControllerContext& c_;
  OperationQueue& queue_;
  PodHealthMonitor& health_;
};

}  // namespace kshard::manager
