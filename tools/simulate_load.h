// `kshardctl simulate --workload`: how evenly each strategy spreads a skewed load over the pods,
// on a simulated clock.
//
// The pods do not change; the entities' load does. `entities` entities ("entity-1", ...) land on
// shards by kshard's shard function (sharding/shard_id.h). Each entity has a rank in a Zipf law of
// exponent s: the entity of rank r costs 1 / r^s. Workloads:
//   zipf:S      the ranks are drawn once (seeded): a fixed skew.
//   hotspot:S   the ranks are drawn anew every `hotspotPeriod`: the hot entities move.
//   diurnal:S   fixed ranks, and half the entities (by their id's hash) peak at noon, the other
//               half at midnight: load(t) = cost x (1 ± swing x sin(2 pi t / diurnalPeriod)).
//
// Strategies, each from the placement it makes on the ready pods (tools/simulate_run.h):
//   count  kshard's count planner (sharding/planner.h): with fixed pods, balanced counts, no move.
//   load   kshard's load planner (sharding/load_planner.h) every `roundInterval`, from the count
//          placement, on loads measured as the sidecars measure them: a decayed average with
//          half-life `measureHalfLife`, sampled each round.
//   akka   Akka's LeastShardAllocationStrategy (2.6.10+): counts, like `count`.
//   ring   consistent hashing (Dapr's placement): shards where the ring puts them.
//
// Each round the true peak-to-mean of the pods' loads is sampled (peak pod over the mean pod, all
// pods). The hottest shard's bound is the lowest peak-to-mean any placement can reach then.
// Recovery (hotspot): after each move of the hot spot, the rounds until the peak-to-mean is back
// within max(1 + tolerance, bound); the worst over the run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tools/simulate_ledger.h"

namespace kshard::tools {

enum class WorkloadKind { kZipf, kHotspot, kDiurnal };
enum class LoadStrategy { kCount, kLoad, kAkka, kRing };

std::string_view loadStrategyName(LoadStrategy strategy);
std::optional<LoadStrategy> parseLoadStrategy(std::string_view name);

struct Workload {
  WorkloadKind kind = WorkloadKind::kZipf;
  double exponent = 1.0;  // s, in [0, 5]
};
// "zipf:1.0", "hotspot:1.2", "diurnal:0.8"; the exponent may be left out (1.0).
[[nodiscard]] StatusOr<Workload> parseWorkload(std::string_view text);

struct LoadSimulationConfig {
  Workload workload;
  std::int32_t shards = 1000;
  std::int32_t pods = 20;
  std::int64_t entities = 100000;  // 1..10,000,000
  SimTime duration = std::chrono::hours(1);
  SimTime roundInterval = std::chrono::seconds(20);  // the ShardMap's rebalanceInterval
  SimTime measureHalfLife = std::chrono::minutes(1);
  SimTime hotspotPeriod = std::chrono::minutes(10);
  SimTime diurnalPeriod = std::chrono::hours(1);
  double diurnalSwing = 0.8;  // [0, 1)
  double tolerance = 0.10;
  std::int32_t cooldownRounds = 3;
  double rebalanceRate = 0.02;
  std::int32_t virtualNodes = 100;
  std::uint64_t seed = 0;
};

struct LoadSimulationResult {
  LoadStrategy strategy = LoadStrategy::kCount;
  double peakToMeanP50 = 0;
  double peakToMeanMax = 0;
  double hottestShardBound = 0;  // its median over the run
  std::int64_t moves = 0;
  double movesPerMinute = 0;
  // Hotspot only: the worst recovery in rounds; nullopt when a move of the hot spot was never
  // recovered from before the next (or the run's end), or for other workloads.
  std::optional<std::int32_t> recoveryRounds;
  std::int32_t hotspotMoves = 0;  // how many times the hot spot moved
};

// InvalidArgument naming the first bad field.
[[nodiscard]] Status validateLoadConfig(const LoadSimulationConfig& config);

// InvalidArgument as validateLoadConfig; Internal if a strategy failed (a bug).
[[nodiscard]] StatusOr<LoadSimulationResult> simulateLoad(const LoadSimulationConfig& config,
                                                          LoadStrategy strategy);

}  // namespace kshard::tools
