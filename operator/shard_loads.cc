#include "operator/shard_loads.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kshard::manager {
namespace {

// A shard that never moved: its cooldown is long over.
constexpr std::int64_t kNeverMoved = std::numeric_limits<std::int64_t>::min() / 2;

void ensureSized(ShardLoads& loads, std::int32_t shardCount) {
  const auto n = static_cast<std::size_t>(shardCount);
  if (loads.load.size() == n) return;
  loads.load.assign(n, 0);
  loads.movedAt.assign(n, kNeverMoved);
}

// `value` with 3 significant digits.
double rounded(double value) {
  if (value <= 0 || !std::isfinite(value)) return 0;
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(value)));
  return std::round(value * scale) / scale;
}

}  // namespace

void recordPings(ShardLoads& loads, const sharding::ShardTable& table,
                 const std::vector<PingOutcome>& pings) {
  ensureSized(loads, table.shardCount());
  for (std::size_t p = 0; p < pings.size(); ++p) {
    const PingOutcome& ping = pings[p];
    if (ping.state != PingOutcome::State::kAnswered) continue;
    loads.measured = true;
    const auto ours = [&](ShardId s) {
      return s >= 1 && s <= table.shardCount() && table.owner(s) == static_cast<PodIndex>(p) &&
             std::binary_search(ping.held.begin(), ping.held.end(), s);
    };
    for (ShardId s : ping.held) {
      if (ours(s)) loads.load[static_cast<std::size_t>(s - 1)] = 0;
    }
    for (const auto& [s, value] : ping.load) {
      if (ours(s)) loads.load[static_cast<std::size_t>(s - 1)] = value;
    }
  }
  ++loads.periodicRounds;
}

void recordMoves(ShardLoads& loads, std::int32_t shardCount, const std::vector<Move>& applied) {
  ensureSized(loads, shardCount);
  for (const Move& m : applied) loads.movedAt[static_cast<std::size_t>(m.shard - 1)] =
      loads.periodicRounds;
}

bool balancesByLoad(const sharding::ShardMap& map, const sharding::ShardTable& table,
                    const ShardLoads& loads) {
  if (map.spec.balance != sharding::Balance::kLoad || !loads.measured) return false;
  if (loads.load.size() != static_cast<std::size_t>(table.shardCount())) return false;
  const auto owners = table.owners();
  return std::find(owners.begin(), owners.end(), sharding::kNoPod) == owners.end();
}

sharding::LoadPlanningInput loadPlanningInput(sharding::PlanningInput base,
                                              const ShardLoads& loads, double tolerance) {
  sharding::LoadPlanningInput in;
  in.base = std::move(base);
  in.load = loads.load;
  in.roundsSinceMoved.reserve(loads.movedAt.size());
  for (std::int64_t at : loads.movedAt) {
    const std::int64_t since = loads.periodicRounds - at;
    in.roundsSinceMoved.push_back(
        static_cast<std::int32_t>(std::min<std::int64_t>(since, in.cooldownRounds + 1)));
  }
  in.tolerance = tolerance;
  return in;
}

void writeLoadStatus(sharding::ShardMapStatus& status, const sharding::ShardTable& table,
                     const ShardLoads& loads) {
  if (loads.load.size() != static_cast<std::size_t>(table.shardCount())) return;
  const std::vector<PodIndex> owners(table.owners().begin(), table.owners().end());
  const std::vector<double> podLoad = sharding::podLoads(owners, status.pods.size(), loads.load);
  for (std::size_t p = 0; p < status.pods.size(); ++p) status.pods[p].load = rounded(podLoad[p]);
  const sharding::LoadSummary summary =
      sharding::summarizeLoad(owners, status.pods.size(), loads.load);
  sharding::LoadStatus out;
  out.peakToMean = rounded(summary.peakToMean);
  out.bound = rounded(summary.bound);
  double total = 0;
  for (double l : podLoad) total += l;
  out.total = rounded(total);
  std::vector<ShardId> hottest;
  for (std::size_t i = 0; i < loads.load.size(); ++i) {
    if (loads.load[i] > 0 && owners[i] != sharding::kNoPod) {
      hottest.push_back(static_cast<ShardId>(i + 1));
    }
  }
  const auto busier = [&](ShardId a, ShardId b) {
    const double la = loads.load[static_cast<std::size_t>(a - 1)];
    const double lb = loads.load[static_cast<std::size_t>(b - 1)];
    return la != lb ? la > lb : a < b;
  };
  const std::size_t n = std::min(hottest.size(), sharding::kHottestShards);
  std::partial_sort(hottest.begin(), hottest.begin() + static_cast<std::ptrdiff_t>(n),
                    hottest.end(), busier);
  for (std::size_t i = 0; i < n; ++i) {
    const ShardId s = hottest[i];
    out.hottest.push_back({s, status.pods[static_cast<std::size_t>(table.owner(s))].name,
                           rounded(loads.load[static_cast<std::size_t>(s - 1)])});
  }
  status.load = std::move(out);
}

bool loadStatusDue(const ShardLoads& loads, SteadyTime now, bool writingAnyway) {
  if (!loads.measured) return false;
  return writingAnyway || !loads.statusWritten || now - *loads.statusWritten >= kLoadStatusInterval;
}

bool loadWithinTolerance(const sharding::LoadStatus& load, double tolerance) {
  // The figures keep 3 significant digits: allow for their rounding.
  return load.peakToMean <= std::max(1 + tolerance, load.bound) * 1.005;
}

}  // namespace kshard::manager
