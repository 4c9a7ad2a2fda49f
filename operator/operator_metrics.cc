#include "operator/operator_metrics.h"

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
      podShards_(registry.gauge("kshard_operator_pod_shards", "Shards owned per registered pod")),
      apiRequests_(registry.counter("kshard_operator_api_requests_total",
                                    "Manager API requests by verb and HTTP status code")),
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
  unassigned_.with({{"shard_map", shardMap}}).set(status.unassignedCount);
  pods_.with({{"shard_map", shardMap}}).set(static_cast<double>(status.pods.size()));
  std::lock_guard lock(mu_);
  std::set<std::string>& series = podSeries_[shardMap];
  std::set<std::string> now;
  for (const auto& p : status.pods) {
    podShards_.with({{"shard_map", shardMap}, {"pod", p.name}}).set(p.shards);
    now.insert(p.name);
  }
  for (const auto& gone : series) {
    if (!now.count(gone)) podShards_.remove({{"shard_map", shardMap}, {"pod", gone}});
  }
  series = std::move(now);
}

void OperatorMetrics::forget(const std::string& shardMap) {
  unassigned_.remove({{"shard_map", shardMap}});
  pods_.remove({{"shard_map", shardMap}});
  std::lock_guard lock(mu_);
  for (const auto& pod : podSeries_[shardMap]) {
    podShards_.remove({{"shard_map", shardMap}, {"pod", pod}});
  }
  podSeries_.erase(shardMap);
}

void OperatorMetrics::setLeader(bool leader) { leader_.set(leader ? 1 : 0); }

void OperatorMetrics::apiRequest(std::string_view verb, int httpStatus) {
  apiRequests_.with({{"verb", std::string(verb)}, {"code", std::to_string(httpStatus)}}).inc();
}

}  // namespace kshard::manager
