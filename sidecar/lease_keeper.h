// LeaseKeeper: keeps this pod's ownership lease (sidecar/ownership_lease.h) running while the
// pod is registered.
//
// Every quarter of the lease (spec.ownershipLease) it sends the manager a renew. When that fails
// (the operator is down, unreachable or moving its leadership), it asks the API server instead:
// a GET of its ShardMap made with the pod's bound service-account token, which the API server
// accepts only while the pod object exists with this uid. Either answer confirms the lease from
// the moment its request went out. With neither for most of a lease, the registry fences itself:
// a pod cut off from both serves for at most one lease, which is what the operator waits out
// before it moves the shards of a pod that vanished while its processes may still run.
//
// A renew the manager refuses because it does not know this incarnation (the pod was removed,
// or its registration lost) calls `onNotRegistered`, so the sidecar registers again.
#pragma once

#include <functional>
#include <mutex>
#include <optional>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "sidecar/entity_registry.h"
#include "sidecar/identity.h"
#include "sidecar/manager_client.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

class LeaseKeeper {
 public:
  // `api` may be null (--map-source=manager: the operator is then the only confirmation).
  LeaseKeeper(Identity self, ManagerClient& manager, kube::Client* api, EntityRegistry& registry,
              const RoutingTable& table, Scheduler& scheduler, Random& random, Logger logger,
              std::function<void()> onNotRegistered);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts renewing (at once), or keeps renewing if started. Idempotent.
  void start();
  // Stops renewing (an unregistered pod owns nothing); the lease then runs out.
  void stop();

 private:
  void tick(std::uint64_t generation);
  void askApiServer(std::uint64_t generation);
  void scheduleNext(std::uint64_t generation);
  Duration period() const;
  bool current(std::uint64_t generation);

  const Identity self_;
  ManagerClient& manager_;
  kube::Client* api_;
  EntityRegistry& registry_;
  const RoutingTable& table_;
  Scheduler& scheduler_;
  Logger log_;
  const std::function<void()> onNotRegistered_;

  std::mutex mu_;
  Random& random_;  // under mu_
  bool running_ = false;
  std::uint64_t generation_ = 0;  // bumped by start/stop: older ticks find theirs stale
  Scheduler::TaskId timer_ = 0;
  bool failing_ = false;  // the last confirmation failed: log the next success
};

}  // namespace kshard::sidecar
