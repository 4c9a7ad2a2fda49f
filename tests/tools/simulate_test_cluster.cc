#include "tests/tools/simulate_test_cluster.h"

#include <gtest/gtest.h>

namespace kshard::tools {

TestCluster::TestCluster(std::int32_t shards, const Factory& makeManager, DeploymentTiming timing,
                         RollingUpdateParams rolling)
    : ledger(shards),
      deployment(scheduler, timing, rolling, *this),
      manager(makeManager(scheduler, ledger, deployment)) {}

void TestCluster::start(std::int32_t pods) {
  const std::vector<SimPod> initial = deployment.startReady(pods, "1.0.0");
  for (SimPod p : initial) ledger.setServing(p, true);
  manager->startWith(initial);
  ledger.resetCounters();
}

void TestCluster::runUntilSettled() {
  for (int i = 0; i < 1000000 && !(deployment.stable() && manager->settled()); ++i) {
    scheduler.advance(std::chrono::seconds(1));
  }
  ASSERT_TRUE(deployment.stable()) << "the pods did not settle";
  ASSERT_TRUE(manager->settled()) << "the manager did not settle";
  ASSERT_TRUE(manager->error().ok()) << manager->error().message();
}

std::map<sharding::ShardId, SimPod> TestCluster::owners() const {
  std::map<sharding::ShardId, SimPod> out;
  for (sharding::ShardId s = 1; s <= ledger.shardCount(); ++s) out[s] = ledger.owner(s);
  return out;
}

std::vector<std::int32_t> TestCluster::counts(const std::vector<SimPod>& pods) const {
  std::vector<std::int32_t> out;
  for (SimPod p : pods) out.push_back(ledger.countOf(p));
  return out;
}

void TestCluster::podReady(SimPod pod) {
  ledger.setServing(pod, true);
  manager->podReady(pod);
}

void TestCluster::podTerminating(SimPod pod) {
  ledger.setServing(pod, false);
  manager->podTerminating(pod);
}

void TestCluster::podStopped(SimPod pod) { manager->podStopped(pod); }

void TestCluster::podCrashed(SimPod pod) {
  ledger.setServing(pod, false);
  manager->podCrashed(pod);
}

void TestCluster::podDied(SimPod pod) { manager->podDied(pod); }

std::optional<SimTime> TestCluster::holdUnregister(SimPod pod) {
  return manager->holdUnregister(pod);
}

}  // namespace kshard::tools
