// A ShardMapController (or two, for takeover) wired to the fakes of fake_cluster.h on one
// ManualScheduler, with helpers that drive the workflow and the invariant every test checks
// after every event: no shard is served by two pods, and no pod serves a shard the stored map
// gives to another pod.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "metrics/prometheus_registry.h"
#include "operator/operator_metrics.h"
#include "operator/shard_map_controller.h"
#include "tests/operator/fake_cluster.h"

namespace kshard::manager::testing {

inline constexpr char kNamespace[] = "demo";
inline constexpr char kMapName[] = "counter";
inline constexpr char kMapKey[] = "demo/counter";

class ControllerHarness {
 public:
  explicit ControllerHarness(std::int32_t shards = 30,
                             std::function<void(sharding::ShardMapSpec&)> tweak = nullptr);
  ~ControllerHarness();

  // A replica: a controller with its own leadership, sharing everything else.
  struct Replica {
    std::string name;
    FakeLeadership leadership;
    std::unique_ptr<ControllerDeps> deps;
    std::shared_ptr<ShardMapController> controller;
  };
  Replica& replica(std::size_t i = 0) { return *replicas_.at(i); }
  ShardMapController& controller(std::size_t i = 0) { return *replica(i).controller; }
  // Adds a replica (not leading) seeing the stored object.
  Replica& addReplica(std::string name);
  // Makes replica i the leader and runs until it took over.
  void lead(std::size_t i = 0);
  // Replica i loses its lease (isLeader() turns false at once; the notification follows).
  void loseLease(std::size_t i = 0);

  // A pod that exists in the API (alive, labelled) with a running stub sidecar.
  StubPod& startPod(const std::string& name, const std::string& version = "1.0.0");
  // Registers it and runs until the answer; returns the HTTP status.
  int registerPod(const std::string& name, std::size_t replica = 0);
  int unregisterPod(const std::string& name, std::size_t replica = 0);
  // Sends a call and returns its response once answered (advancing time as needed).
  http::Response call(std::function<void(Reply)> send, Duration limit = std::chrono::seconds(120));

  // The pod object is deleted and the process is gone.
  void killPod(const std::string& name);
  // Every live pod renews its ownership lease with the replica status.manager names, as a
  // sidecar does (every third of spec.ownershipLease; StubPod::renewFault stops it).
  void renewLeases();

  // Runs the scheduler for `d` of simulated time, in small steps.
  void run(Duration d);
  // Runs until `done()` holds or `limit` passes; false on timeout.
  bool runUntil(const std::function<bool()>& done, Duration limit = std::chrono::seconds(300));

  sharding::ShardMap stored() const { return *store.get(kMapKey); }
  sharding::ShardTable storedTable() const;
  // Shards per registered pod in the stored map, by name.
  std::map<std::string, std::int32_t> counts() const;
  std::int32_t unassigned() const { return stored().status.unassignedCount; }
  // Every shard assigned, each served by its stored owner, counts within one.
  bool converged() const;
  // The invariant; records a test failure (once per message) when it does not hold.
  void checkInvariant();
  int invariantChecks() const { return checks_; }
  std::string conditionStatus(const std::string& type) const;
  // Metric value helpers.
  double rebalances(const std::string& result) const;
  double moves() const;

  ManualScheduler scheduler;
  SeededRandom random{7};
  FakeStore store{scheduler};
  StubPods pods{scheduler};
  FakeDirectory directory{scheduler};
  RecordingEvents events;
  metrics::PrometheusRegistry registry;
  OperatorMetrics metrics{registry};
  std::vector<std::string> logs;

 private:
  std::vector<std::unique_ptr<Replica>> replicas_;
  Scheduler::TaskId renewTimer_ = 0;
  int nextIp_ = 10;
  int checks_ = 0;
  std::set<std::string> reported_;
};

}  // namespace kshard::manager::testing
