// Drainer: the pod-stop flow of DESIGN.md, run once however many times it is asked for (the
// preStop hook's POST /v1/drain and SIGTERM both ask):
//   1. refuse new entities; 2. stop every active entity after its accepted messages;
//   3. unregister from the operator, which then moves the shards at once.
// The peer API stays open until the process exits, so senders keep getting clear refusals.
//
// When the entities do not all stop within the handoff timeout, the pod does not unregister:
// its shards must not move while an entity may still run here. The kubelet kills the pod at the
// end of its grace period and the operator then reassigns the shards of the dead pod.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "base/logger.h"
#include "base/status.h"
#include "sidecar/entity_registry.h"
#include "sidecar/manager_client.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

class Drainer {
 public:
  Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table, Logger logger);

  // Starts the drain on the first call; every caller's `done` gets the one result.
  void drain(std::function<void(Status)> done);
  bool started() const;
  bool finished() const;

 private:
  void finish(Status result);

  EntityRegistry& registry_;
  ManagerClient& manager_;
  RoutingTable& table_;
  Logger log_;
  mutable std::mutex mu_;
  bool started_ = false;
  std::optional<Status> result_;
  std::vector<std::function<void(Status)>> waiters_;
};

}  // namespace kshard::sidecar
