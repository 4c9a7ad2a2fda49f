// The map's changes (sharding/json_delta.h) for one round that moves 1 % of the shards, at
// 10,000 shards x 1,000 pods and 100,000 x 10,000: what the leader computes once per version
// (diffJson), what each sidecar applies (applyJsonDelta), and the bytes of the changes against
// the whole status. Release build; figures: docs/benchmarks.md, "The map's changes".
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/random.h"
#include "sharding/json_delta.h"
#include "sharding/shard_map.h"
#include "sharding/shard_map_json.h"
#include "tests/support/large_map.h"

namespace kshard::sharding {
namespace {

// The two versions of the benchmark's size (shards, pods), as JSON.
struct OneRound {
  nlohmann::json from;
  nlohmann::json to;
};

OneRound oneRound(const benchmark::State& state) {
  SeededRandom r(7);
  const ShardMap a = testing::balancedMap(static_cast<std::int32_t>(state.range(0)),
                                          static_cast<std::int32_t>(state.range(1)), r);
  return {toJson(a), toJson(testing::afterOneRound(a, r))};
}

void BM_DiffOneRound(benchmark::State& state) {
  const auto [from, to] = oneRound(state);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const nlohmann::json changes = diffJson(from, to);
    bytes = changes.dump().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["status_bytes"] = static_cast<double>(to.dump().size());
  state.counters["changes_bytes"] = static_cast<double>(bytes);
}

void BM_ApplyOneRound(benchmark::State& state) {
  const auto [from, to] = oneRound(state);
  const nlohmann::json changes = diffJson(from, to);
  for (auto _ : state) {
    auto applied = applyJsonDelta(from, changes);
    if (!applied.ok()) {
      state.SkipWithError(applied.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(textDigest(applied->dump()));
  }
}

BENCHMARK(BM_DiffOneRound)->Args({10000, 1000})->Args({100000, 10000})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ApplyOneRound)->Args({10000, 1000})->Args({100000, 10000})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kshard::sharding

BENCHMARK_MAIN();
