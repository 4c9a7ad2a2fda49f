// Drainer: the pod-stop flow of DESIGN.md. A drain runs once however many times it is asked for
// while it runs (the preStop hook, POST /v1/drain and SIGTERM all ask):
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
//
// A drain is normally followed by the pod's end. When it is not (the operator said the pod is
// not being deleted: a drain asked by hand, or the app container's preStop when only the app
// restarts; or the operator could not say), the drain is undone after `linger` unless the
// process is stopping by then: the registry takes entities again and `onUndrain` runs (the
// sidecar registers again), so that a running pod never stays drained for good.
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
  struct Options {
    // How long a drained pod that is not being deleted waits before it serves again.
    Duration linger = std::chrono::seconds(15);
    std::function<void()> onUndrain;
  };

  Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table,
          Scheduler& scheduler, Logger logger, Options options);
  Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table,
          Scheduler& scheduler, Logger logger)
      : Drainer(registry, manager, table, scheduler, std::move(logger), Options{}) {}
  ~Drainer();

  // Starts a drain unless one runs or is over and not undone; every caller's `done` gets its
  // result.
  void drain(std::function<void(Status)> done);
  // The process is stopping: a drain that is over stays so (no undo).
  void stopping();
  // A drain runs, or is over and not undone.
  bool started() const;
  bool finished() const;

 private:
  enum class State { kServing, kDraining, kDrained };

  void unregistered(StatusOr<protocol::EpochResponse> answer);
  void finish(Status result, bool mayUndo);
  void undo(std::uint64_t cycle);
  // Logs the drain's progress and schedules the next report, until the drain ends.
  void reportProgress();

  EntityRegistry& registry_;
  ManagerClient& manager_;
  RoutingTable& table_;
  Scheduler& scheduler_;
  Logger log_;
  const Options options_;
  mutable std::mutex mu_;
  State state_ = State::kServing;
  std::uint64_t cycle_ = 0;    // drains so far: an undo timer of an older one does nothing
  bool stopping_ = false;
  bool unregistered_ = false;  // step 1 of the current drain is over (whatever its result)
  SteadyTime startedAt_{};
  Scheduler::TaskId progressTask_ = 0;
  Scheduler::TaskId undoTask_ = 0;
  std::optional<Status> result_;
  std::vector<std::function<void(Status)>> waiters_;
};

}  // namespace kshard::sidecar
