// One `kshardctl simulate` run: one strategy through one scenario at one size, on simulated time.
//
// The run builds the steady state before the scenario (the pods ready, the shards placed as the
// strategy places them, not counted), starts the scenario at time 0, and advances the simulated
// clock until the Deployment is stable and the strategy has settled (or maxTime passes). The
// same config gives the same result: all randomness comes from the seed.
//
// Scenarios, with N = pods:
//   scale-up        N -> 2N pods: N pods are created.
//   scale-down      2N -> N pods: N pods (the newest) are deleted.
//   rolling-update  N pods of version 1.0.0 replaced by N of 2.0.0 (maxSurge, maxUnavailable).
//   crash           k of N pods crash (chosen by the seed, the same for every strategy); the
//                   ReplicaSet replaces them once their death is noticed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tools/simulate_akka.h"
#include "tools/simulate_deployment.h"
#include "tools/simulate_kshard.h"

namespace kshard::tools {

// The largest N: scale-up then runs 20,000 pods.
inline constexpr std::int32_t kMaxSimulatedPods = 10000;

enum class Scenario { kScaleUp, kScaleDown, kRollingUpdate, kCrash };
enum class Strategy { kKshard, kAkkaClassic, kAkka, kRing };

std::string_view scenarioName(Scenario scenario);
std::string_view strategyName(Strategy strategy);
std::optional<Scenario> parseScenario(std::string_view name);
std::optional<Strategy> parseStrategy(std::string_view name);

struct SimulationConfig {
  std::int32_t shards = 300;
  std::int32_t pods = 3;  // N
  Scenario scenario = Scenario::kScaleUp;
  Strategy strategy = Strategy::kKshard;
  IntOrPercent crashed{10, true};  // k, at least 1
  std::uint64_t seed = 0;
  KshardParams kshard;
  AkkaParams akka;  // `classic` is set from the strategy
  std::int32_t virtualNodes = 100;
  DeploymentTiming timing;
  RollingUpdateParams rolling;
  SimTime maxTime = std::chrono::hours(24 * 30);
};

struct SimulationResult {
  Scenario scenario = Scenario::kScaleUp;
  Strategy strategy = Strategy::kKshard;
  std::int32_t shards = 0;
  std::int32_t podsBefore = 0;
  std::int32_t podsAfter = 0;
  std::int32_t crashed = 0;  // pods crashed (crash scenario)
  std::int64_t moves = 0;
  std::int64_t placements = 0;
  std::int32_t maxMovesOfOneShard = 0;
  std::int64_t rounds = 0;
  SimTime settleTime{0};  // when ownership last changed
  bool settled = false;   // false: maxTime ran out first
  std::int32_t worstImbalance = 0;
  std::int32_t finalImbalance = 0;
  std::int32_t unassigned = 0;  // shards without owner at the end
  double movesPerShard() const { return static_cast<double>(moves) / shards; }
};

// Called about once per simulated second with the simulated time and the moves so far.
using SimulationProgress = std::function<void(SimTime now, std::int64_t moves)>;

// OK, or InvalidArgument naming what cannot run: a size out of range (shards 1..100000, pods
// 1..10000), more crashed pods than pods.
[[nodiscard]] Status validateConfig(const SimulationConfig& config);

// Pods that crash in the crash scenario: `crashed` of `pods`, at least 1.
std::int32_t crashedPods(const SimulationConfig& config);

// Where the strategy places the shards on `config.pods` ready pods of one version, before any
// scenario: owners[shard - 1] is the pod's position among them (0..pods - 1). InvalidArgument as
// validateConfig; Internal if the strategy failed or left a shard unassigned.
[[nodiscard]] StatusOr<std::vector<std::int32_t>> steadyStateOwners(const SimulationConfig& config);

// InvalidArgument as validateConfig; Internal if a strategy failed (a bug).
[[nodiscard]] StatusOr<SimulationResult> simulate(const SimulationConfig& config,
                                                  const SimulationProgress& progress = {});

}  // namespace kshard::tools
