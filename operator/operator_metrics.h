// The operator's metrics, declared once from the injected registry (names:
// kshard_operator_<thing>_<unit>). Label `shard_map` is "{namespace}/{name}".
//
//   kshard_operator_rebalances_total{shard_map,result}     rounds by result: moved, idle,
//                                                          partial, conflict, aborted, failed
//   kshard_operator_rebalance_duration_seconds{shard_map}  round duration
//   kshard_operator_shard_moves_total{shard_map}           shards given to a new owner
//   kshard_operator_unassigned_shards{shard_map}           shards without owner
//   kshard_operator_pods{shard_map}                        registered pods
//   kshard_operator_pod_shards_min{shard_map}              fewest and most shards a registered
//   kshard_operator_pod_shards_max{shard_map}              pod holds (the balance)
//   kshard_operator_load_peak_to_mean{shard_map}           the busiest pod's load over the mean
//   kshard_operator_load_bound{shard_map}                  the peak-to-mean the hottest shard forces
//   kshard_operator_shard_load{shard_map,shard}            the load of the hottest shards only
//                                                          (status.load.hottest, at most 10)
//   kshard_operator_throttled_shards{shard_map}            shards periodic rounds leave where
//                                                          they are: their handoff backoff runs
//   kshard_operator_handoff_throttles_total{shard_map}     backoffs begun (handoff_throttle.h)
//   kshard_operator_leader                                 1 while this replica leads
//   kshard_operator_api_requests_total{verb,code}          manager API requests by HTTP status
//
// No series names a pod: /metrics is read by whoever reaches the admin port, and the pods of
// every tenant's ShardMap would show there (`kubectl describe shardmap` shows a map's pods to
// those allowed to read it). Each pod's load is in status.pods and in its own sidecar's metrics.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/metrics.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

class OperatorMetrics {
 public:
  explicit OperatorMetrics(metrics::Registry& registry);

  void roundFinished(const std::string& shardMap, std::string_view result, double seconds,
                     std::int64_t moves);
  // The gauges of one ShardMap, from its status.
  void observeStatus(const std::string& shardMap, const sharding::ShardMapStatus& status);
  // The ShardMap is gone: drop its gauge series.
  void forget(const std::string& shardMap);
  // The repeated-failure throttle (handoff_throttle.h): the shards in a backoff now (set by the
  // leader as of its latest round; 0 on a follower), and backoffs that began.
  void observeThrottled(const std::string& shardMap, std::size_t shards);
  void throttleStarted(const std::string& shardMap, std::size_t shards);
  void setLeader(bool leader);
  void apiRequest(std::string_view verb, int httpStatus);

  metrics::Family<metrics::Counter>& rebalances() { return rebalances_; }
  metrics::Family<metrics::Counter>& moves() { return moves_; }
  metrics::Family<metrics::Gauge>& unassigned() { return unassigned_; }
  metrics::Family<metrics::Gauge>& pods() { return pods_; }
  metrics::Family<metrics::Counter>& apiRequests() { return apiRequests_; }
  metrics::Family<metrics::Gauge>& throttled() { return throttled_; }
  metrics::Family<metrics::Counter>& throttleStarts() { return throttleStarts_; }
  metrics::Gauge& leader() { return leader_; }

 private:
  metrics::Family<metrics::Counter>& rebalances_;
  metrics::Family<metrics::Histogram>& duration_;
  metrics::Family<metrics::Counter>& moves_;
  metrics::Family<metrics::Gauge>& unassigned_;
  metrics::Family<metrics::Gauge>& pods_;
  metrics::Family<metrics::Gauge>& podShardsMin_;
  metrics::Family<metrics::Gauge>& podShardsMax_;
  metrics::Family<metrics::Counter>& apiRequests_;
  metrics::Family<metrics::Gauge>& peakToMean_;
  metrics::Family<metrics::Gauge>& loadBound_;
  metrics::Family<metrics::Gauge>& shardLoad_;
  metrics::Family<metrics::Gauge>& throttled_;
  metrics::Family<metrics::Counter>& throttleStarts_;
  metrics::Gauge& leader_;
  std::mutex mu_;  // the controllers of several maps observe at once
  std::map<std::string, std::vector<sharding::ShardId>> hotShards_;  // by map: the shard series

  void observeLoad(const std::string& shardMap, const std::optional<sharding::LoadStatus>& load);
};

}  // namespace kshard::manager
