// TestCluster: a shard manager under simulation wired to a SimulatedDeployment and a ledger as
// simulate() wires them, with the clock in the test's hands, for cases worked by hand.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/random.h"
#include "base/scheduler.h"
#include "tools/simulate_deployment.h"
#include "tools/simulate_ledger.h"
#include "tools/simulate_manager.h"

namespace kshard::tools {

class TestCluster final : public PodListener {
 public:
  using Factory = std::function<std::unique_ptr<SimulatedManager>(Scheduler&, OwnershipLedger&,
                                                                  const SimulatedDeployment&)>;

  TestCluster(std::int32_t shards, const Factory& makeManager, DeploymentTiming timing = {},
              RollingUpdateParams rolling = {});

  // `pods` ready pods of version 1.0.0, the shards placed as the manager places them; counters
  // reset, as before a scenario.
  void start(std::int32_t pods);
  // Advances one simulated second at a time until the pods are stable and the manager settled.
  void runUntilSettled();
  std::map<sharding::ShardId, SimPod> owners() const;
  // Shard counts of `pods`, in that order.
  std::vector<std::int32_t> counts(const std::vector<SimPod>& pods) const;

  void podReady(SimPod pod) override;
  void podTerminating(SimPod pod) override;
  void podStopped(SimPod pod) override;
  void podCrashed(SimPod pod) override;
  void podDied(SimPod pod) override;
  std::optional<SimTime> holdUnregister(SimPod pod) override;

  ManualScheduler scheduler;
  OwnershipLedger ledger;
  SimulatedDeployment deployment;
  std::unique_ptr<SimulatedManager> manager;
};

}  // namespace kshard::tools
