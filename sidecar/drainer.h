// Drainer: the pod-stop flow of DESIGN.md, run once however many times it is asked for (the
// preStop hook's POST /v1/drain and SIGTERM both ask):
//   1. unregister from the operator. The operator unassigns the pod's shards from it (their
//      entities stop after their accepted messages, within the handoff timeout), records the pod
//      gone and moves the shards at once. Until then the pod serves as before: in a rolling
//      update the operator may hold the unregister while pods of the new version start, so that
//      the shards move once, straight to them (operator/unregister_hold.h);
//   2. refuse new entities and stop whatever still runs (nothing, once step 1 succeeded).
// The peer API stays open until the process exits, so senders keep getting clear refusals.
// Until it ends, a line every 5 s says which step the drain is at and how many entities are
// still active.
//
// When the unregister fails (the operator unreachable, or the entities of a shard did not stop
// within the handoff timeout), the pod stays registered: its shards must not move while an
// entity may still run here. Step 2 still stops the entities; the kubelet ends the pod, and the
// operator then reassigns the shards of the dead pod.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "base/logger.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "sidecar/entity_registry.h"
#include "sidecar/manager_client.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

class Drainer {
 public:
  Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table,
          Scheduler& scheduler, Logger logger);

  // Starts the drain on the first call; every caller's `done` gets the one result.
  void drain(std::function<void(Status)> done);
  bool started() const;
  bool finished() const;

 private:
  void finish(Status result);
  // Logs the drain's progress and schedules the next report, until the drain ends.
  void reportProgress();

  EntityRegistry& registry_;
  ManagerClient& manager_;
  RoutingTable& table_;
  Scheduler& scheduler_;
  Logger log_;
  mutable std::mutex mu_;
  bool started_ = false;
  bool unregistered_ = false;  // step 1 is over (whatever its result)
  SteadyTime startedAt_{};
  Scheduler::TaskId progressTask_ = 0;
  std::optional<Status> result_;
  std::vector<std::function<void(Status)>> waiters_;
};

}  // namespace kshard::sidecar
