#include "tools/simulate_load_command.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tools/simulate_options.h"
#include "tools/simulate_run.h"

namespace kshard::tools {
namespace {

struct LoadOptions {
  LoadSimulationConfig config;
  std::vector<LoadStrategy> strategies{LoadStrategy::kCount, LoadStrategy::kLoad,
                                       LoadStrategy::kAkka, LoadStrategy::kRing};
  std::string workload;
  bool json = false;
  bool quiet = false;
};

OptionSet::Setter count(std::int32_t* target, std::int32_t max) {
  return integer<std::int32_t>(target, 0, max);
}

StatusOr<LoadOptions> parseLoadOptions(std::span<const std::string> args) {
  LoadOptions o;
  LoadSimulationConfig& c = o.config;
  std::string format = "table";
  OptionSet set("kshardctl simulate", "");
  set.addString("workload", "", "", &o.workload);
  set.add("shards", "", "", "", count(&c.shards, sharding::kMaxShardCount));
  set.add("pods", "", "", "", count(&c.pods, kMaxSimulatedPods));
  set.add("entities", "", "", "", integer<std::int64_t>(&c.entities, 1, 10'000'000));
  set.add("strategies", "", "", "",
          nameList(&o.strategies, &parseLoadStrategy, "count, load, akka, ring"));
  set.add("duration", "", "", "", duration(&c.duration, true));
  set.add("rebalance-interval", "", "", "", duration(&c.roundInterval, true));
  set.add("rebalance-rate", "", "", "", fraction(&c.rebalanceRate));
  set.add("tolerance", "", "", "", real(&c.tolerance));
  set.add("cooldown-rounds", "", "", "", count(&c.cooldownRounds, 1000));
  set.add("measure-half-life", "", "", "", duration(&c.measureHalfLife, true));
  set.add("hotspot-period", "", "", "", duration(&c.hotspotPeriod, true));
  set.add("diurnal-period", "", "", "", duration(&c.diurnalPeriod, true));
  set.add("diurnal-swing", "", "", "", real(&c.diurnalSwing));
  set.add("virtual-nodes", "", "", "", count(&c.virtualNodes, 1000));
  set.add("seed", "", "", "",
          integer<std::uint64_t>(&c.seed, 0, std::numeric_limits<std::uint64_t>::max()));
  set.addString("format", "", "", &format);
  set.addBool("quiet", "", "", &o.quiet);

  if (Status s = parseArguments(set, args); !s.ok()) return s;
  StatusOr<Workload> workload = parseWorkload(o.workload);
  if (!workload.ok()) return invalidArgument("--workload: " + workload.status().message());
  c.workload = *workload;
  if (format != "table" && format != "json") {
    return invalidArgument("--format: must be table or json with --workload, not \"" + format +
                           "\"");
  }
  o.json = format == "json";
  if (Status s = validateLoadConfig(c); !s.ok()) return s;
  return o;
}

std::string formatNumber(double value) {
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << value;
  return out.str();
}

nlohmann::json toJson(const LoadOptions& o, const LoadSimulationResult& r) {
  const LoadSimulationConfig& c = o.config;
  nlohmann::json j = {{"strategy", loadStrategyName(r.strategy)},
                      {"workload", o.workload},
                      {"shards", c.shards},
                      {"pods", c.pods},
                      {"entities", c.entities},
                      {"peak_to_mean_p50", r.peakToMeanP50},
                      {"peak_to_mean_max", r.peakToMeanMax},
                      {"hottest_shard_bound", r.hottestShardBound},
                      {"moves", r.moves},
                      {"moves_per_minute", r.movesPerMinute},
                      {"hotspot_moves", r.hotspotMoves},
                      {"recovery_rounds", nullptr}};
  if (r.recoveryRounds) j["recovery_rounds"] = *r.recoveryRounds;
  return j;
}

std::string formatLoadTable(const std::vector<LoadSimulationResult>& results) {
  std::string out =
      "| strategy | peak/mean p50 | peak/mean max | hottest-shard bound | moves/min | recovery "
      "(rounds) |\n|---|---|---|---|---|---|\n";
  for (const LoadSimulationResult& r : results) {
    out += "| " + std::string(loadStrategyName(r.strategy)) + " | " +
           formatNumber(r.peakToMeanP50) + " | " + formatNumber(r.peakToMeanMax) + " | " +
           formatNumber(r.hottestShardBound) + " | " + formatNumber(r.movesPerMinute) + " | " +
           (r.hotspotMoves == 0 ? std::string("-")
            : r.recoveryRounds  ? std::to_string(*r.recoveryRounds)
                                : std::string("never")) +
           " |\n";
  }
  return out;
}

}  // namespace

bool wantsWorkload(std::span<const std::string> args) {
  for (const std::string& a : args) {
    if (a == "--workload" || a.starts_with("--workload=")) return true;
  }
  return false;
}

int runLoadSimulate(std::span<const std::string> args, CommandIo& io) {
  StatusOr<LoadOptions> options = parseLoadOptions(args);
  if (!options.ok()) return usageError(io, "simulate", options.status().message());
  const LoadOptions& o = *options;
  std::vector<LoadSimulationResult> results;
  for (LoadStrategy strategy : o.strategies) {
    if (!o.quiet)
      io.err << "kshardctl simulate: " << o.workload << " " << loadStrategyName(strategy)
             << " ...\n";
    StatusOr<LoadSimulationResult> result = simulateLoad(o.config, strategy);
    if (!result.ok()) {
      io.err << "kshardctl simulate: internal error: " << result.status().message() << "\n";
      return kExitFailure;
    }
    results.push_back(*result);
  }
  if (o.json) {
    nlohmann::json array = nlohmann::json::array();
    for (const LoadSimulationResult& r : results) array.push_back(toJson(o, r));
    io.out << array.dump(2) << "\n";
  } else {
    io.out << formatLoadTable(results);
  }
  return kExitOk;
}

}  // namespace kshard::tools
