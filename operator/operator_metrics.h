// The operator's metrics, declared once from the injected registry (names:
// kshard_operator_<thing>_<unit>). Label `shard_map` is "{namespace}/{name}".
//
//   kshard_operator_rebalances_total{shard_map,result}     rounds by result: moved, idle,
//                                                          partial, conflict, aborted, failed
//   kshard_operator_rebalance_duration_seconds{shard_map}  round duration
//   kshard_operator_shard_moves_total{shard_map}           shards given to a new owner
//   kshard_operator_unassigned_shards{shard_map}           shards without owner
//   kshard_operator_pods{shard_map}                        registered pods
//   kshard_operator_pod_shards{shard_map,pod}              shards per pod
//   kshard_operator_leader                                 1 while this replica leads
//   kshard_operator_api_requests_total{verb,code}          manager API requests by HTTP status
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "metrics/metrics.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

class OperatorMetrics {
 public:
  explicit OperatorMetrics(metrics::Registry& registry);

  void roundFinished(const std::string& shardMap, std::string_view result, double seconds,
                     std::int64_t moves);
  // The gauges of one ShardMap, from its status. Pods no longer registered lose their series.
  void observeStatus(const std::string& shardMap, const sharding::ShardMapStatus& status);
  // The ShardMap is gone: drop its gauge series.
  void forget(const std::string& shardMap);
  void setLeader(bool leader);
  void apiRequest(std::string_view verb, int httpStatus);

  metrics::Family<metrics::Counter>& rebalances() { return rebalances_; }
  metrics::Family<metrics::Counter>& moves() { return moves_; }
  metrics::Family<metrics::Gauge>& unassigned() { return unassigned_; }
  metrics::Family<metrics::Gauge>& pods() { return pods_; }
  metrics::Family<metrics::Gauge>& podShards() { return podShards_; }
  metrics::Family<metrics::Counter>& apiRequests() { return apiRequests_; }
  metrics::Gauge& leader() { return leader_; }

 private:
  metrics::Family<metrics::Counter>& rebalances_;
  metrics::Family<metrics::Histogram>& duration_;
  metrics::Family<metrics::Counter>& moves_;
  metrics::Family<metrics::Gauge>& unassigned_;
  metrics::Family<metrics::Gauge>& pods_;
  metrics::Family<metrics::Gauge>& podShards_;
  metrics::Family<metrics::Counter>& apiRequests_;
  metrics::Gauge& leader_;

  std::mutex mu_;
  std::map<std::string, std::set<std::string>> podSeries_;  // shard map -> pods with a series
};

}  // namespace kshard::manager
