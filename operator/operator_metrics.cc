#include "operator/operator_metrics.h"

#include <algorithm>

namespace kshard::manager {
namespace {

// Rounds take from milliseconds (nothing to move) to the handoff timeout (30 s by default).
const std::vector<double>& roundBuckets() {
  static const std::vector<double> buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                           2.5,   5,    10,    20,   30,  60,   120};
  return buckets;
}

}  // namespace

OperatorMetrics::OperatorMetrics(metrics::Registry& registry)
    : rebalances_(registry.counter("kshard_operator_rebalances_total",
                                   "Rebalance rounds by result (moved, idle, partial, conflict, "
                                   "aborted, failed)")),
      duration_(registry.histogram("kshard_operator_rebalance_duration_seconds",
                                   "Duration of rebalance rounds", roundBuckets())),
      moves_(registry.counter("kshard_operator_shard_moves_total",
                              "Shards given to a new owner (unassigned shards placed included)")),
      unassigned_(registry.gauge("kshard_operator_unassigned_shards", "Shards without an owner")),
      pods_(registry.gauge("kshard_operator_pods", "Pods registered with a ShardMap")),
      podShardsMin_(registry.gauge("kshard_operator_pod_shards_min",
                                   "Fewest shards a registered pod of the ShardMap owns")),
      podShardsMax_(registry.gauge("kshard_operator_pod_shards_max",
                                   "Most shards a registered pod of the ShardMap owns")),
      apiRequests_(registry.counter("kshard_operator_api_requests_total",
                                    "Manager API requests by verb and HTTP status code")),
      peakToMean_(registry.gauge("kshard_operator_load_peak_to_mean",
                                 "The busiest registered pod's measured load over the mean")),
      loadBound_(registry.gauge("kshard_operator_load_bound",
                                "The lowest peak-to-mean any placement reaches: the hottest "
                                "shard's load over the mean")),
      shardLoad_(registry.gauge("kshard_operator_shard_load",
                                "Measured load (app seconds per second) of the hottest shards")),
      throttled_(registry.gauge("kshard_operator_throttled_shards",
                                "Shards whose handoff failed handoffFailureLimit times in a row, "
                                "left where they are until their backoff has passed")),
      throttleStarts_(registry.counter("kshard_operator_handoff_throttles_total",
                                       "Backoffs begun by shards whose handoff failed "
                                       "handoffFailureLimit times or more in a row")),
      leader_(
          registry.gauge("kshard_operator_leader", "1 while this replica is the leader").with({})) {
}

void OperatorMetrics::roundFinished(const std::string& shardMap, std::string_view result,
                                    double seconds, std::int64_t moves) {
  rebalances_.with({{"shard_map", shardMap}, {"result", std::string(result)}}).inc();
  duration_.with({{"shard_map", shardMap}}).observe(seconds);
  if (moves > 0) moves_.with({{"shard_map", shardMap}}).inc(static_cast<double>(moves));
}

void OperatorMetrics::observeStatus(const std::string& shardMap,
                                    const sharding::ShardMapStatus& status) {
  observeLoad(shardMap, status.load);
  unassigned_.with({{"shard_map", shardMap}}).set(status.unassignedCount);
  pods_.with({{"shard_map", shardMap}}).set(static_cast<double>(status.pods.size()));
  if (status.pods.empty()) {
    podShardsMin_.remove({{"shard_map", shardMap}});
    podShardsMax_.remove({{"shard_map", shardMap}});
    return;
  }
  const auto [fewest, most] =
      std::minmax_element(status.pods.begin(), status.pods.end(),
                          [](const auto& a, const auto& b) { return a.shards < b.shards; });
  podShardsMin_.with({{"shard_map", shardMap}}).set(fewest->shards);
  podShardsMax_.with({{"shard_map", shardMap}}).set(most->shards);
}

void OperatorMetrics::observeLoad(const std::string& shardMap,
                                  const std::optional<sharding::LoadStatus>& load) {
  const metrics::Labels map{{"shard_map", shardMap}};
  if (load) {
    peakToMean_.with(map).set(load->peakToMean);
    loadBound_.with(map).set(load->bound);
  } else {
    peakToMean_.remove(map);
    loadBound_.remove(map);
  }
  std::lock_guard lock(mu_);
  std::vector<sharding::ShardId>& shown = hotShards_[shardMap];
  const auto labels = [&](sharding::ShardId s) {
    return metrics::Labels{{"shard_map", shardMap}, {"shard", std::to_string(s)}};
  };
  for (sharding::ShardId s : shown) shardLoad_.remove(labels(s));
  shown.clear();
  if (!load) return;
  for (const sharding::ShardLoadReport& h : load->hottest) {
    shardLoad_.with(labels(h.shard)).set(h.load);
    shown.push_back(h.shard);
  }
}

void OperatorMetrics::forget(const std::string& shardMap) {
  observeLoad(shardMap, std::nullopt);
  {
    std::lock_guard lock(mu_);
    hotShards_.erase(shardMap);
  }
  unassigned_.remove({{"shard_map", shardMap}});
  pods_.remove({{"shard_map", shardMap}});
  podShardsMin_.remove({{"shard_map", shardMap}});
  podShardsMax_.remove({{"shard_map", shardMap}});
  throttled_.remove({{"shard_map", shardMap}});
}

void OperatorMetrics::observeThrottled(const std::string& shardMap, std::size_t shards) {
  throttled_.with({{"shard_map", shardMap}}).set(static_cast<double>(shards));
}

void OperatorMetrics::throttleStarted(const std::string& shardMap, std::size_t shards) {
  throttleStarts_.with({{"shard_map", shardMap}}).inc(static_cast<double>(shards));
}

void OperatorMetrics::setLeader(bool leader) { leader_.set(leader ? 1 : 0); }

void OperatorMetrics::apiRequest(std::string_view verb, int httpStatus) {
  apiRequests_.with({{"verb", std::string(verb)}, {"code", std::to_string(httpStatus)}}).inc();
}

}  // namespace kshard::manager
