#include "operator/shard_loads.h"

#include <algorithm>
#include <cmath>

namespace kshard::manager {
namespace {

void ensureSized(ShardLoads& loads, std::int32_t shardCount) {
  const auto n = static_cast<std::size_t>(shardCount);
  if (loads.load.size() == n) return;
  loads.load.assign(n, 0);
  loads.movedAt.assign(n, std::nullopt);
  loads.movedSinceReport.assign(n, false);
}

// `value` with 3 significant digits; 0 below 1e-9 (and for anything not a finite number).
double rounded(double value) {
  if (!(value >= 1e-9) || !std::isfinite(value)) return 0;
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(value)));
  return std::round(value * scale) / scale;
}

std::string keyOf(const sharding::RegisteredPod& pod) {
  return pod.name + "/" + pod.uid + "/" + pod.incarnation;
}

// Forgets the pods no longer registered.
void keepOnly(std::set<std::string>& keys, const std::set<std::string>& registered) {
  std::erase_if(keys, [&](const std::string& k) { return !registered.contains(k); });
}

}  // namespace

LoadKnowledge loadKnowledge(const std::vector<sharding::RegisteredPod>& pods,
                            const ShardLoads& loads) {
  LoadKnowledge out = LoadKnowledge::kComplete;
  for (const auto& pod : pods) {
    const std::string key = keyOf(pod);
    if (loads.silent.contains(key)) return LoadKnowledge::kSilentPods;
    if (!loads.reported.contains(key)) out = LoadKnowledge::kWaiting;
  }
  return out;
}

void recordPings(ShardLoads& loads, const sharding::ShardTable& table,
                 const std::vector<sharding::RegisteredPod>& pods,
                 const std::vector<PingOutcome>& pings) {
  ensureSized(loads, table.shardCount());
  std::set<std::string> registered;
  for (const auto& pod : pods) registered.insert(keyOf(pod));
  keepOnly(loads.reported, registered);
  keepOnly(loads.silent, registered);
  for (std::size_t p = 0; p < pings.size() && p < pods.size(); ++p) {
    const PingOutcome& ping = pings[p];
    if (ping.state != PingOutcome::State::kAnswered) continue;
    const std::string key = keyOf(pods[p]);
    if (!ping.reportsLoad) {
      loads.silent.insert(key);
      continue;
    }
    loads.silent.erase(key);
    loads.reported.insert(key);
    loads.measured = true;
    const auto ours = [&](ShardId s) {
      return s >= 1 && s <= table.shardCount() && table.owner(s) == static_cast<PodIndex>(p) &&
             std::binary_search(ping.held.begin(), ping.held.end(), s);
    };
    for (ShardId s : ping.held) {
      const auto i = static_cast<std::size_t>(s - 1);
      if (!ours(s)) continue;
      // Not listed: no load, unless it just arrived and no turn of it has ended yet.
      if (!loads.movedSinceReport[i]) loads.load[i] = 0;
      loads.movedSinceReport[i] = false;
    }
    for (const auto& [s, value] : ping.load) {
      if (ours(s)) loads.load[static_cast<std::size_t>(s - 1)] = value;
    }
  }
}

void recordMoves(ShardLoads& loads, std::int32_t shardCount, const std::vector<Move>& applied,
                 SteadyTime now) {
  ensureSized(loads, shardCount);
  for (const Move& m : applied) {
    if (!m.from) continue;
    const auto i = static_cast<std::size_t>(m.shard - 1);
    loads.movedAt[i] = now;
    loads.movedSinceReport[i] = true;
  }
}

bool balancesByLoad(const sharding::ShardMap& map, const sharding::ShardTable& table,
                    const ShardLoads& loads) {
  if (map.spec.balance != sharding::Balance::kLoad ||
      loadKnowledge(map.status.pods, loads) != LoadKnowledge::kComplete) {
    return false;
  }
  if (loads.load.size() != static_cast<std::size_t>(table.shardCount())) return false;
  const auto owners = table.owners();
  return std::find(owners.begin(), owners.end(), sharding::kNoPod) == owners.end();
}

sharding::LoadPlanningInput loadPlanningInput(sharding::PlanningInput base,
                                              const ShardLoads& loads, double tolerance,
                                              SteadyTime now, Duration interval) {
  sharding::LoadPlanningInput in;
  in.base = std::move(base);
  in.load = loads.load;
  in.tolerance = tolerance;
  in.minMeanLoad = kMinLoadToBalance;
  if (interval > Duration::zero()) {
    const auto intervals = (kLoadCooldown + interval - Duration{1}) / interval;
    in.cooldownRounds = static_cast<std::int32_t>(
        std::clamp<std::int64_t>(intervals, in.cooldownRounds, 10000));
  }
  const std::int32_t longAgo = in.cooldownRounds + 1;
  in.roundsSinceMoved.reserve(loads.movedAt.size());
  for (const auto& at : loads.movedAt) {
    if (!at || interval <= Duration::zero()) {
      in.roundsSinceMoved.push_back(longAgo);
      continue;
    }
    const auto rounds = (now - *at) / interval;
    in.roundsSinceMoved.push_back(
        static_cast<std::int32_t>(std::clamp<std::int64_t>(rounds, 0, longAgo)));
  }
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
    if (rounded(loads.load[i]) > 0 && owners[i] != sharding::kNoPod) {
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
  if (loads.statusDropped && now - *loads.statusDropped < kLoadStatusRetry) return false;
  return writingAnyway || !loads.statusWritten || now - *loads.statusWritten >= kLoadStatusInterval;
}

bool loadMateriallyChanged(const sharding::ShardMapStatus& before,
                           const sharding::ShardMapStatus& after,
                           std::optional<double> tolerance) {
  if (!before.load || !after.load || before.pods.size() != after.pods.size()) {
    return before.load.has_value() != after.load.has_value() ||
           before.pods.size() != after.pods.size();
  }
  const sharding::LoadStatus& b = *before.load;
  const sharding::LoadStatus& a = *after.load;
  if (std::abs(a.peakToMean - b.peakToMean) >= 0.05 || std::abs(a.bound - b.bound) >= 0.05) {
    return true;
  }
  if (tolerance && loadWithinTolerance(a, *tolerance) != loadWithinTolerance(b, *tolerance)) {
    return true;
  }
  const double mean =
      std::max(a.total, b.total) / static_cast<double>(std::max<std::size_t>(1, after.pods.size()));
  for (std::size_t p = 0; p < after.pods.size(); ++p) {
    const auto& was = before.pods[p].load;
    const auto& now = after.pods[p].load;
    if (was.has_value() != now.has_value()) return true;
    if (now && std::abs(*now - *was) > 0.1 * mean) return true;
  }
  return false;
}

bool loadWithinTolerance(const sharding::LoadStatus& load, double tolerance) {
  // The figures keep 3 significant digits: allow for their rounding.
  return load.peakToMean <= std::max(1 + tolerance, load.bound) * 1.005;
}

}  // namespace kshard::manager
