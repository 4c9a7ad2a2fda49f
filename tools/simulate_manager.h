// SimulatedManager: a shard manager under simulation (kshard's operator, Akka's coordinator with
// one of its allocation strategies, or a consistent-hash ring), for `kshardctl simulate`.
//
// A manager hears of pods through the PodListener calls of the SimulatedDeployment, decides with
// its own rules and timers (on the injected Scheduler's simulated clock), and changes ownership
// only through the OwnershipLedger, which counts every strategy the same way.
#pragma once

#include <vector>

#include "base/scheduler.h"
#include "base/status.h"
#include "tools/simulate_deployment.h"
#include "tools/simulate_ledger.h"

namespace kshard::tools {

class SimulatedManager : public PodListener {
 public:
  // The steady state before a scenario: `pods` (ready, in registration order) registered and the
  // shards placed as this strategy places them, directly, without simulated time. Starts the
  // manager's periodic timers.
  virtual void startWith(const std::vector<SimPod>& pods) = 0;
  // A registered pod is gone: it drained and unregistered (podStopped), or its crash was noticed
  // (podDied). Every strategy here treats the two alike.
  virtual void podGone(SimPod pod) = 0;
  void podStopped(SimPod pod) final { podGone(pod); }
  void podDied(SimPod pod) final { podGone(pod); }
  // Nothing in flight, and the manager's own balancing check ran after the last change and
  // found nothing to do: the assignment will not change unless a pod does.
  virtual bool settled() const = 0;
  // OK, or the first internal error (a bug: the run is not to be trusted).
  virtual Status error() const { return {}; }

 protected:
  // Every strategy decides on `scheduler`'s clock and changes ownership only through `ledger`.
  SimulatedManager(Scheduler& scheduler, OwnershipLedger& ledger,
                   const SimulatedDeployment& deployment)
      : scheduler_(scheduler),
        ledger_(ledger),
        deployment_(deployment),
        start_(scheduler.clock().now()) {}

  // Simulated time since the manager was made.
  SimTime now() const { return scheduler_.clock().now() - start_; }

  Scheduler& scheduler_;
  OwnershipLedger& ledger_;
  const SimulatedDeployment& deployment_;
  const SteadyTime start_;
};

}  // namespace kshard::tools
