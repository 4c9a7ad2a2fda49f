#include "tools/simulate_load.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <utility>

#include "base/enum_names.h"
#include "base/random.h"
#include "sharding/load_planner.h"
#include "sharding/shard_id.h"
#include "tools/simulate_run.h"

namespace kshard::tools {
namespace {

constexpr std::pair<LoadStrategy, std::string_view> kLoadStrategies[] = {
    {LoadStrategy::kCount, "count"},
    {LoadStrategy::kLoad, "load"},
    {LoadStrategy::kAkka, "akka"},
    {LoadStrategy::kRing, "ring"}};

constexpr std::pair<WorkloadKind, std::string_view> kWorkloads[] = {
    {WorkloadKind::kZipf, "zipf"},
    {WorkloadKind::kHotspot, "hotspot"},
    {WorkloadKind::kDiurnal, "diurnal"}};

constexpr std::int64_t kMaxEntities = 10'000'000;

// The entities of a run: where each lives, which half of the day it peaks in, and what its rank
// costs. Ranks are drawn (and, for a hot spot, drawn again) from the run's seed.
class Entities {
 public:
  Entities(const LoadSimulationConfig& config, Random& random)
      : random_(random),
        shard_(static_cast<std::size_t>(config.entities)),
        night_(static_cast<std::size_t>(config.entities)),
        rankOf_(static_cast<std::size_t>(config.entities)),
        costOfRank_(static_cast<std::size_t>(config.entities)) {
    for (std::size_t e = 0; e < shard_.size(); ++e) {
      const std::int32_t hash = *sharding::javaStringHashCode("entity-" + std::to_string(e + 1));
      shard_[e] = sharding::shardIdOfHash(hash, config.shards);
      night_[e] = ((static_cast<std::uint32_t>(hash) >> 16) & 1) != 0;
      rankOf_[e] = e;
      costOfRank_[e] = 1 / std::pow(static_cast<double>(e + 1), config.workload.exponent);
    }
    drawRanks();
  }

  // A new random rank for every entity: the hot entities are others now.
  void drawRanks() {
    for (std::size_t i = rankOf_.size(); i > 1; --i) {
      std::swap(rankOf_[i - 1], rankOf_[static_cast<std::size_t>(random_.uniform(i))]);
    }
  }

  // Per shard, the cost of its day entities and of its night entities.
  std::pair<std::vector<double>, std::vector<double>> shardCosts(std::int32_t shards) const {
    std::vector<double> day(static_cast<std::size_t>(shards), 0);
    std::vector<double> night(static_cast<std::size_t>(shards), 0);
    for (std::size_t e = 0; e < shard_.size(); ++e) {
      auto& costs = night_[e] ? night : day;
      costs[static_cast<std::size_t>(shard_[e] - 1)] += costOfRank_[rankOf_[e]];
    }
    return {std::move(day), std::move(night)};
  }

 private:
  Random& random_;
  std::vector<sharding::ShardId> shard_;
  std::vector<bool> night_;
  std::vector<std::size_t> rankOf_;
  std::vector<double> costOfRank_;
};

StatusOr<std::vector<sharding::PodIndex>> initialOwners(const LoadSimulationConfig& c,
                                                        LoadStrategy strategy) {
  SimulationConfig placement;
  placement.shards = c.shards;
  placement.pods = c.pods;
  placement.seed = c.seed;
  placement.virtualNodes = c.virtualNodes;
  placement.kshard.rebalanceRate = c.rebalanceRate;
  placement.strategy = strategy == LoadStrategy::kAkka   ? Strategy::kAkka
                       : strategy == LoadStrategy::kRing ? Strategy::kRing
                                                         : Strategy::kKshard;
  return steadyStateOwners(placement);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

// One run, round by round: the loads now, the planner's moves (load strategy), the samples.
class LoadRun {
 public:
  LoadRun(const LoadSimulationConfig& config, LoadStrategy strategy,
          std::vector<sharding::PodIndex> owners)
      : c_(config),
        strategy_(strategy),
        random_(config.seed ^ 0x5851f42d4c957f2dULL),
        entities_(config, random_) {
    in_.base.shardCount = config.shards;
    in_.base.pods.assign(static_cast<std::size_t>(config.pods), {"1.0.0", true, false});
    in_.base.owners = std::move(owners);
    in_.base.rebalanceRate = config.rebalanceRate;
    in_.roundsSinceMoved.assign(static_cast<std::size_t>(config.shards), config.cooldownRounds);
    in_.tolerance = config.tolerance;
    in_.cooldownRounds = config.cooldownRounds;
    costs_ = entities_.shardCosts(config.shards);
  }

  StatusOr<LoadSimulationResult> run() {
    const auto rounds = static_cast<std::int32_t>(c_.duration / c_.roundInterval);
    const double decay = std::pow(0.5, std::chrono::duration<double>(c_.roundInterval) /
                                           std::chrono::duration<double>(c_.measureHalfLife));
    for (std::int32_t round = 0; round < rounds; ++round) {
      const SimTime now = c_.roundInterval * round;
      if (c_.workload.kind == WorkloadKind::kHotspot && round > 0 &&
          now % c_.hotspotPeriod < c_.roundInterval) {
        moveHotspot(round);
      }
      const std::vector<double> load = loadAt(now);
      measured_.resize(load.size());
      for (std::size_t s = 0; s < load.size(); ++s) {
        measured_[s] = round == 0 ? load[s] : decay * measured_[s] + (1 - decay) * load[s];
      }
      if (strategy_ == LoadStrategy::kLoad) {
        if (Status s = rebalance(); !s.ok()) return s;
      }
      sample(round, sharding::summarizeLoad(in_.base.owners, in_.base.pods.size(), load));
    }
    if (recoveringSince_) recovered_ = false;
    return result();
  }

 private:
  std::vector<double> loadAt(SimTime now) const {
    double swing = 0;
    if (c_.workload.kind == WorkloadKind::kDiurnal) {
      using Seconds = std::chrono::duration<double>;
      const double phase = Seconds(now) / Seconds(c_.diurnalPeriod);
      swing = c_.diurnalSwing * std::sin(2 * std::numbers::pi * phase);
    }
    std::vector<double> load(costs_.first.size());
    for (std::size_t s = 0; s < load.size(); ++s) {
      load[s] = costs_.first[s] * (1 + swing) + costs_.second[s] * (1 - swing);
    }
    return load;
  }

  void moveHotspot(std::int32_t round) {
    if (recoveringSince_) recovered_ = false;  // not back within the band before it moved again
    entities_.drawRanks();
    costs_ = entities_.shardCosts(c_.shards);
    ++hotspotMoves_;
    recoveringSince_ = round;
  }

  Status rebalance() {
    in_.load = measured_;
    StatusOr<std::vector<sharding::Move>> moves = sharding::decideByLoad(in_);
    if (!moves.ok()) return internalError("load planner: " + moves.status().message());
    for (std::int32_t& r : in_.roundsSinceMoved) ++r;
    for (const sharding::Move& m : *moves) {
      in_.base.owners[static_cast<std::size_t>(m.shard - 1)] = m.to;
      in_.roundsSinceMoved[static_cast<std::size_t>(m.shard - 1)] = 0;
    }
    moves_ += static_cast<std::int64_t>(moves->size());
    return {};
  }

  void sample(std::int32_t round, const sharding::LoadSummary& now) {
    peakToMean_.push_back(now.peakToMean);
    bound_.push_back(now.bound);
    if (recoveringSince_ && now.peakToMean <= std::max(1 + c_.tolerance, now.bound) + 1e-9) {
      worstRecovery_ = std::max(worstRecovery_, round - *recoveringSince_);
      recoveringSince_.reset();
    }
  }

  LoadSimulationResult result() const {
    LoadSimulationResult r;
    r.strategy = strategy_;
    r.peakToMeanP50 = median(peakToMean_);
    r.peakToMeanMax =
        peakToMean_.empty() ? 0 : *std::max_element(peakToMean_.begin(), peakToMean_.end());
    r.hottestShardBound = median(bound_);
    r.moves = moves_;
    r.movesPerMinute = static_cast<double>(moves_) /
                       std::chrono::duration<double, std::ratio<60>>(c_.duration).count();
    r.hotspotMoves = hotspotMoves_;
    if (hotspotMoves_ > 0 && recovered_) r.recoveryRounds = worstRecovery_;
    return r;
  }

  const LoadSimulationConfig& c_;
  LoadStrategy strategy_;
  SeededRandom random_;
  Entities entities_;
  std::pair<std::vector<double>, std::vector<double>> costs_;
  sharding::LoadPlanningInput in_;
  std::vector<double> measured_;
  std::vector<double> peakToMean_;
  std::vector<double> bound_;
  std::int64_t moves_ = 0;
  std::int32_t hotspotMoves_ = 0;
  std::optional<std::int32_t> recoveringSince_;
  std::int32_t worstRecovery_ = 0;
  bool recovered_ = true;  // every move of the hot spot so far was recovered from
};

}  // namespace

std::string_view loadStrategyName(LoadStrategy strategy) {
  return nameIn(kLoadStrategies, strategy, "?");
}

std::optional<LoadStrategy> parseLoadStrategy(std::string_view name) {
  return valueIn(kLoadStrategies, name);
}

StatusOr<Workload> parseWorkload(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::optional<WorkloadKind> kind = valueIn(kWorkloads, text.substr(0, colon));
  if (!kind) {
    return invalidArgument("unknown workload \"" + std::string(text.substr(0, colon)) +
                           "\" (known: zipf, hotspot, diurnal)");
  }
  Workload w{*kind, 1.0};
  if (colon == std::string_view::npos) return w;
  const std::string exponent(text.substr(colon + 1));
  char* end = nullptr;
  w.exponent = std::strtod(exponent.c_str(), &end);
  if (exponent.empty() || end != exponent.c_str() + exponent.size() || !(w.exponent >= 0) ||
      w.exponent > 5) {
    return invalidArgument("the Zipf exponent must be a number in [0, 5], not \"" + exponent +
                           "\"");
  }
  return w;
}

Status validateLoadConfig(const LoadSimulationConfig& c) {
  if (c.shards < sharding::kMinShardCount || c.shards > sharding::kMaxShardCount) {
    return invalidArgument("shards must be in 1..100000, not " + std::to_string(c.shards));
  }
  if (c.pods < 1 || c.pods > kMaxSimulatedPods) {
    return invalidArgument("pods must be in 1..10000, not " + std::to_string(c.pods));
  }
  if (c.entities < 1 || c.entities > kMaxEntities) {
    return invalidArgument("entities must be in 1..10000000, not " + std::to_string(c.entities));
  }
  if (c.roundInterval <= SimTime{0} || c.measureHalfLife <= SimTime{0} ||
      c.hotspotPeriod <= SimTime{0} || c.diurnalPeriod <= SimTime{0}) {
    return invalidArgument("the round interval, half-life and periods must be positive");
  }
  if (c.duration < c.roundInterval) {
    return invalidArgument("the duration must be at least one round interval");
  }
  if (!(c.tolerance > 0 && c.tolerance <= 10)) {
    return invalidArgument("tolerance must be > 0 and <= 10");
  }
  if (!(c.rebalanceRate > 0 && c.rebalanceRate <= 1)) {
    return invalidArgument("rebalance rate must be > 0 and <= 1");
  }
  if (!(c.diurnalSwing >= 0 && c.diurnalSwing < 1)) {
    return invalidArgument("the diurnal swing must be in [0, 1)");
  }
  if (c.cooldownRounds < 0) return invalidArgument("cooldown rounds must be >= 0");
  if (c.virtualNodes < 1 || c.virtualNodes > 1000) {
    return invalidArgument("virtual nodes must be in 1..1000");
  }
  return {};
}

StatusOr<LoadSimulationResult> simulateLoad(const LoadSimulationConfig& config,
                                            LoadStrategy strategy) {
  if (Status s = validateLoadConfig(config); !s.ok()) return s;
  StatusOr<std::vector<sharding::PodIndex>> owners = initialOwners(config, strategy);
  if (!owners.ok()) return owners.status();
  LoadRun run(config, strategy, std::move(*owners));
  return run.run();
}

}  // namespace kshard::tools
