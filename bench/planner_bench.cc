// Planner benchmarks: one full decision at 10,000 shards x 1,000 pods (goal: <= 10 ms) and at
// 100,000 shards x 10,000 pods (goal: <= 200 ms), release build. Figures: docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "base/random.h"
#include "sharding/planner.h"

namespace kshard::sharding {
namespace {

constexpr std::uint64_t kSeed = 42;

PlanningInput emptyInput(std::int32_t shards, std::int32_t pods, const char* version) {
  PlanningInput in;
  in.shardCount = shards;
  in.pods.assign(static_cast<std::size_t>(pods), PlannerPod{version, true, false});
  in.owners.assign(static_cast<std::size_t>(shards), kNoPod);
  in.rebalanceRate = 0.02;
  return in;
}

// The shards 1..N in a random order, so that dealing them out scatters each pod's shards over
// the id space, as they are after a few rounds.
std::vector<ShardId> shuffledShards(std::int32_t shards, Random& r) {
  std::vector<ShardId> order(static_cast<std::size_t>(shards));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<ShardId>(i + 1);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[r.uniform(i)]);
  return order;
}

// Deals order[begin, end) round-robin to pods firstPod .. firstPod + podCount - 1.
void deal(PlanningInput& in, const std::vector<ShardId>& order, std::size_t begin, std::size_t end,
          std::int32_t firstPod, std::int32_t podCount) {
  for (std::size_t i = begin; i < end; ++i) {
    in.owners[static_cast<std::size_t>(order[i] - 1)] =
        firstPod + static_cast<std::int32_t>((i - begin) % static_cast<std::size_t>(podCount));
  }
}

void run(benchmark::State& state, const PlanningInput& in) {
  std::size_t moves = 0;
  for (auto _ : state) {
    SeededRandom random(kSeed);
    StatusOr<std::vector<Move>> decided = decide(in, random);
    if (!decided.ok()) {
      state.SkipWithError(decided.status().message().c_str());
      return;
    }
    moves = decided->size();
    benchmark::DoNotOptimize(decided);
  }
  state.counters["moves"] = static_cast<double>(moves);
}

std::int32_t shardsArg(const benchmark::State& s) { return static_cast<std::int32_t>(s.range(0)); }
std::int32_t podsArg(const benchmark::State& s) { return static_cast<std::int32_t>(s.range(1)); }

// Periodic round after a scale-up: 90% of the pods hold every shard, 10% just joined empty.
void BM_ScaleUpPeriodicRound(benchmark::State& state) {
  SeededRandom r(1);
  PlanningInput in = emptyInput(shardsArg(state), podsArg(state), "1.0.0");
  const std::vector<ShardId> order = shuffledShards(in.shardCount, r);
  deal(in, order, 0, order.size(), 0, podsArg(state) * 9 / 10);
  run(state, in);
}

// Immediate placement of every shard: the first round after all pods registered at once.
void BM_ImmediatePlacementOfAllShards(benchmark::State& state) {
  PlanningInput in = emptyInput(shardsArg(state), podsArg(state), "1.0.0");
  in.immediate = true;
  run(state, in);
}

// A rolling update in progress: the first half of the pods run the old version (one in ten
// terminating), the second half the new one (one in twenty not ready yet). Old pods hold 80% of
// the shards, new pods 10% (placed when earlier old pods left), and the last 10% are unassigned:
// their old pods have just unregistered. The immediate round places them on ready new pods only.
void BM_RollingUpdateRound(benchmark::State& state) {
  SeededRandom r(2);
  const std::int32_t pods = podsArg(state);
  const std::int32_t half = pods / 2;
  PlanningInput in = emptyInput(shardsArg(state), pods, "1.0.0");
  for (std::int32_t p = 0; p < pods; ++p) {
    PlannerPod& pod = in.pods[static_cast<std::size_t>(p)];
    if (p < half) {
      pod.terminating = p % 10 == 0;
    } else {
      pod.version = "1.1.0";
      pod.ready = p % 20 != 0;
    }
  }
  const std::vector<ShardId> order = shuffledShards(in.shardCount, r);
  const std::size_t eighty = order.size() * 8 / 10;
  const std::size_t ninety = order.size() * 9 / 10;
  deal(in, order, 0, eighty, 0, half);
  deal(in, order, eighty, ninety, half, pods - half);
  in.immediate = true;
  run(state, in);
}

// The steady state, every rebalanceInterval: a balanced map, nothing to move.
void BM_BalancedPeriodicRound(benchmark::State& state) {
  SeededRandom r(3);
  PlanningInput in = emptyInput(shardsArg(state), podsArg(state), "1.0.0");
  const std::vector<ShardId> order = shuffledShards(in.shardCount, r);
  deal(in, order, 0, order.size(), 0, podsArg(state));
  run(state, in);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shards", "pods"})
      ->Args({10000, 1000})
      ->Args({100000, 10000})
      ->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_ScaleUpPeriodicRound)->Apply(sizes);
BENCHMARK(BM_ImmediatePlacementOfAllShards)->Apply(sizes);
BENCHMARK(BM_RollingUpdateRound)->Apply(sizes);
BENCHMARK(BM_BalancedPeriodicRound)->Apply(sizes);

}  // namespace
}  // namespace kshard::sharding

BENCHMARK_MAIN();
