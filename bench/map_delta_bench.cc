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

namespace kshard::sharding {
namespace {

// A balanced map as registration leaves it: each pod's shards scattered over the id space, given
// in two rounds; pod names, uids and addresses as Kubernetes makes them.
ShardMap balancedMap(std::int32_t shards, std::int32_t pods, Random& r) {
  ShardMap m;
  m.metadata.name = "counter";
  m.metadata.namespace_ = "demo";
  m.metadata.resourceVersion = "1000";
  m.spec.shards = shards;
  m.status.epoch = 40;
  for (std::int32_t i = 0; i < pods; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08x-1f2e-4d3c-8b7a-%012x", static_cast<unsigned>(i),
                  static_cast<unsigned>(r.uniform(1u << 30)));
    m.status.pods.push_back({"counter-7d9c8b5f4-" + std::to_string(10000 + i), uid,
                             "10.244." + std::to_string(i / 250) + "." +
                                 std::to_string(i % 250 + 1) + ":7101",
                             "1.4.2", 0, std::to_string(0xa1b2c3d4e5f60000ULL + i), {}});
  }
  ShardTable table(shards);
  std::vector<ShardId> order(static_cast<std::size_t>(shards));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<ShardId>(i + 1);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[r.uniform(i)]);
  for (std::size_t i = 0; i < order.size(); ++i) {
    table.assign(order[i], static_cast<PodIndex>(i % static_cast<std::size_t>(pods)),
                 30 + static_cast<std::int64_t>(r.uniform(2)));
  }
  writeShardTable(table, m.status);
  return m;
}

// The next version: 1 % of the shards, chosen at random, move to other pods at a new epoch.
ShardMap afterOneRound(const ShardMap& before, Random& r) {
  ShardMap next = before;
  next.metadata.resourceVersion = "1001";
  next.status.epoch = before.status.epoch + 1;
  auto table = shardTableFromStatus(before.status, before.spec.shards);
  const auto pods = static_cast<std::uint64_t>(before.status.pods.size());
  for (std::int32_t k = 0; k < before.spec.shards / 100; ++k) {
    const auto shard = static_cast<ShardId>(r.uniform(static_cast<std::uint64_t>(
                                                before.spec.shards)) +
                                            1);
    table->assign(shard, static_cast<PodIndex>(r.uniform(pods)), next.status.epoch);
  }
  writeShardTable(*table, next.status);
  return next;
}

// The two versions of the benchmark's size (shards, pods), as JSON.
struct OneRound {
  nlohmann::json from;
  nlohmann::json to;
};

OneRound oneRound(const benchmark::State& state) {
  SeededRandom r(7);
  const ShardMap a = balancedMap(static_cast<std::int32_t>(state.range(0)),
                                 static_cast<std::int32_t>(state.range(1)), r);
  return {toJson(a), toJson(afterOneRound(a, r))};
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
