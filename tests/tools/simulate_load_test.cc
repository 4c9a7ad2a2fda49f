// `kshardctl simulate --workload`: the workload model, the strategies' results against what the
// load planner promises (docs/benchmarks.md, "Load-aware balancing"), and the command's output.
#include "tools/simulate_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/tools/kshardctl_runner.h"
#include "tools/command.h"

namespace kshard::tools {
namespace {

LoadSimulationResult runOrFail(const LoadSimulationConfig& config, LoadStrategy strategy) {
  StatusOr<LoadSimulationResult> r = simulateLoad(config, strategy);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.valueOr({});
}

LoadSimulationConfig issueSize(WorkloadKind kind, double exponent) {
  LoadSimulationConfig c;
  c.workload = {kind, exponent};
  c.shards = 1000;
  c.pods = 20;
  c.entities = 100000;
  return c;
}

TEST(SimulateLoad, ParsesWorkloadsAndRefusesOthers) {
  StatusOr<Workload> w = parseWorkload("hotspot:1.2");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->kind, WorkloadKind::kHotspot);
  EXPECT_DOUBLE_EQ(w->exponent, 1.2);
  w = parseWorkload("diurnal");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->kind, WorkloadKind::kDiurnal);
  EXPECT_DOUBLE_EQ(w->exponent, 1.0);
  for (const char* bad : {"", "zipf:", "zipf:x", "zipf:-1", "zipf:6", "pareto:1"}) {
    EXPECT_EQ(parseWorkload(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SimulateLoad, RefusesConfigurationsItCannotRun) {
  LoadSimulationConfig c;
  c.entities = 0;
  EXPECT_EQ(validateLoadConfig(c).code(), StatusCode::kInvalidArgument);
  c = {};
  c.duration = std::chrono::seconds(1);
  EXPECT_EQ(validateLoadConfig(c).code(), StatusCode::kInvalidArgument);
  c = {};
  c.tolerance = 0;
  EXPECT_EQ(validateLoadConfig(c).code(), StatusCode::kInvalidArgument);
  c = {};
  c.diurnalSwing = 1;
  EXPECT_EQ(validateLoadConfig(c).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(validateLoadConfig({}).ok());
}

TEST(SimulateLoad, TheSameSeedGivesTheSameRun) {
  LoadSimulationConfig c = issueSize(WorkloadKind::kHotspot, 1.0);
  c.seed = 9;
  const LoadSimulationResult a = runOrFail(c, LoadStrategy::kLoad);
  const LoadSimulationResult b = runOrFail(c, LoadStrategy::kLoad);
  EXPECT_EQ(a.moves, b.moves);
  EXPECT_EQ(a.peakToMeanP50, b.peakToMeanP50);
  EXPECT_EQ(a.recoveryRounds, b.recoveryRounds);
}

// The issue's figure: 1,000 shards, 20 pods, 100,000 entities, Zipf s = 1.0.
TEST(SimulateLoad, LoadModeReachesTheHottestShardsBoundWhereCountsDoNot) {
  const LoadSimulationConfig c = issueSize(WorkloadKind::kZipf, 1.0);
  const LoadSimulationResult load = runOrFail(c, LoadStrategy::kLoad);
  const LoadSimulationResult count = runOrFail(c, LoadStrategy::kCount);
  EXPECT_LE(load.peakToMeanP50, std::max(1.15, load.hottestShardBound) + 1e-9);
  EXPECT_LE(load.movesPerMinute, 0.02 * c.shards);
  EXPECT_GT(count.peakToMeanP50, load.peakToMeanP50 + 0.1);
  EXPECT_EQ(count.moves, 0);
}

TEST(SimulateLoad, WithAMilderSkewLoadModeStaysWithinTheTolerance) {
  const LoadSimulationConfig c = issueSize(WorkloadKind::kZipf, 0.8);
  const LoadSimulationResult load = runOrFail(c, LoadStrategy::kLoad);
  EXPECT_DOUBLE_EQ(load.hottestShardBound, 1.0);
  EXPECT_LE(load.peakToMeanP50, 1.15);
  EXPECT_GT(runOrFail(c, LoadStrategy::kRing).peakToMeanP50, 1.15);
}

TEST(SimulateLoad, AfterTheHotSpotMovesLoadModeIsBackWithinFiveRounds) {
  const LoadSimulationConfig c = issueSize(WorkloadKind::kHotspot, 1.0);
  const LoadSimulationResult load = runOrFail(c, LoadStrategy::kLoad);
  EXPECT_EQ(load.hotspotMoves, 5);  // every 10 min of the hour but the first
  ASSERT_TRUE(load.recoveryRounds.has_value());
  EXPECT_LE(*load.recoveryRounds, 5);
  EXPECT_LE(load.movesPerMinute, 0.02 * c.shards);
  EXPECT_FALSE(runOrFail(c, LoadStrategy::kCount).recoveryRounds.has_value());
}

TEST(SimulateLoad, AnEvenLoadMovesNothing) {
  LoadSimulationConfig c = issueSize(WorkloadKind::kZipf, 0.0);
  c.shards = 200;
  c.pods = 10;  // 20 shards a pod, 500 entities a shard: within the 10 % tolerance everywhere
  EXPECT_EQ(runOrFail(c, LoadStrategy::kLoad).moves, 0);
}

TEST(SimulateLoadCommand, JsonHasOneObjectPerStrategyWithTheDocumentedFields) {
  const RunResult r = runInProcess({"simulate", "--workload", "zipf:1.0", "--shards", "300",
                                    "--pods", "6", "--entities", "5000", "--format", "json"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.err.find("zipf:1.0 load"), std::string::npos) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_TRUE(out.is_array());
  std::vector<std::string> strategies;
  for (const nlohmann::json& o : out) {
    strategies.push_back(o.at("strategy"));
    for (const char* key :
         {"peak_to_mean_p50", "peak_to_mean_max", "moves_per_minute", "hottest_shard_bound"}) {
      EXPECT_TRUE(o.at(key).is_number()) << key;
    }
  }
  EXPECT_EQ(strategies, (std::vector<std::string>{"count", "load", "akka", "ring"}));
}

TEST(SimulateLoadCommand, BadOptionsExitTwoWithOneLine) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", "--workload", "pareto"},
        {"simulate", "--workload", "zipf", "--format", "csv"},
        {"simulate", "--workload", "zipf", "--strategies", "load,best"},
        {"simulate", "--workload", "zipf", "--tolerance", "0"}}) {
    const RunResult r = runInProcess(args);
    EXPECT_EQ(r.exitCode, kExitUsage) << args.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace kshard::tools
