// SidecarMetrics: every metric kshard-sidecar exports, declared once. Hot paths use the
// pre-resolved children (no label lookup per message).
//
//   kshard_sidecar_messages_total{path, result}       path: local | forwarded | received
//   kshard_sidecar_message_duration_seconds{path}     end-to-end latency as the sidecar sees it
//   kshard_sidecar_retries_total{reason}              reason: no_owner | not_managed | unreachable
//   kshard_sidecar_active_entities{type}              set at scrape time (refresh)
//   kshard_sidecar_owned_shards                       set at scrape time (refresh)
//   kshard_sidecar_passivations_total                 entities stopped for idleness
//   kshard_sidecar_entity_limit_passivations_total    idle entities stopped to make a place
//                                                     under spec.maxActiveEntitiesPerPod
//   kshard_sidecar_waiting_entities                   new entities waiting for such a place
//                                                     (set at scrape time)
//   kshard_sidecar_handoffs_total{result}             unassign/revoke/drain handoffs: ok | timeout
//   kshard_sidecar_load_messages_per_second           the owned shards' decayed message rate
//   kshard_sidecar_load_busy_ratio                    app seconds a second on their turns
//   kshard_sidecar_shard_load_busy_ratio{shard}       the same, for the busiest shards only
//                                                     (kTopShards: bounded cardinality)
//   kshard_sidecar_map_versions_total{source}         changes | api
//   kshard_sidecar_map_bytes_total{source}            manager | api
//   kshard_sidecar_topic_publishes_total              publications this pod's app published
//   kshard_sidecar_topic_deliveries_total{result}     one per pod of each publication, as the
//                                                     publisher saw it: accepted | refused |
//                                                     unknown (may have been delivered) |
//                                                     not_sent (timed out before it went out,
//                                                     or the pod left)
//   kshard_sidecar_remembered_entities                entities in the records of the owned shards
//                                                     (sidecar/remembered_entities.h)
//   kshard_sidecar_remembered_record_writes_total{result}  stored | failed
//   kshard_sidecar_singletons_active                  set at scrape time (showSingletons)
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "metrics/metrics.h"
#include "sidecar/map_sync_stats.h"
#include "sidecar/shard_load.h"

namespace kshard::sidecar {

enum class MessagePath { kLocal = 0, kForwarded, kReceived };
enum class MessageResult { kOk = 0, kAppError, kRefused, kOverloaded, kTimeout, kFailed };
enum class RetryReason { kNoOwner = 0, kNotManaged, kUnreachable, kCallerRefused };
enum class TopicResult { kAccepted = 0, kRefused, kUnknown, kNotSent };

class SidecarMetrics {
 public:
  explicit SidecarMetrics(metrics::Registry& registry);

  void countMessage(MessagePath path, MessageResult result);
  void observeLatency(MessagePath path, double seconds);
  void countRetry(RetryReason reason);
  void countPassivation() { passivations_.inc(); }
  void countLimitPassivation() { limitPassivations_.inc(); }
  void showWaitingEntities(std::size_t waiting) {
    waitingEntities_.set(static_cast<double>(waiting));
  }
  void countHandoff(bool ok) { (ok ? handoffOk_ : handoffTimeout_).inc(); }
  void countPublish() { publishes_.inc(); }
  void countTopicDelivery(TopicResult result) {
    topicDeliveries_[static_cast<std::size_t>(result)]->inc();
  }
  void countRecordWrite(bool stored) { (stored ? recordStored_ : recordFailed_).inc(); }
  // Set at scrape time.
  void showRemembered(std::size_t entities) { remembered_.set(static_cast<double>(entities)); }
  // Sets the gauges read at scrape time: the active entities of each type listed (a type
  // listed before and missing now loses its series) and the number of shards owned.
  void refresh(const std::vector<std::pair<std::string, std::size_t>>& activeByType,
               std::size_t ownedShards);
  // Sets the load gauges from a sample of the owned shards: the pod's totals, and the busiest
  // kTopShards shards (by busy time, then messages; a shard that leaves the top loses its series).
  void showLoad(const std::vector<ShardLoad>& load);
  static constexpr std::size_t kTopShards = 5;
  // Brings the map counters up to `stats` (the map watch's running totals):
  //   kshard_sidecar_map_versions_total{source}   changes | api
  //   kshard_sidecar_map_bytes_total{source}      manager | api
  void showMapSync(const MapSyncStats& stats);
  void showSingletons(std::size_t active) { singletonsActive_.set(static_cast<double>(active)); }

 private:
  static constexpr std::size_t kPaths = 3;
  static constexpr std::size_t kResults = 6;
  static constexpr std::size_t kReasons = 4;
  static constexpr std::size_t kTopicResults = 4;
  // Declares the families with labels and resolves their children, for the hot paths.
  void resolveLabelledSeries(metrics::Registry& registry);
  std::array<std::array<metrics::Counter*, kResults>, kPaths> messages_{};
  std::array<metrics::Histogram*, kPaths> latency_{};
  std::array<metrics::Counter*, kReasons> retries_{};
  metrics::Counter& passivations_;
  metrics::Counter& limitPassivations_;
  metrics::Gauge& waitingEntities_;
  metrics::Counter& handoffOk_;
  metrics::Counter& handoffTimeout_;
  metrics::Gauge& ownedShards_;
  metrics::Family<metrics::Gauge>& activeEntities_;
  metrics::Gauge& loadMessages_;
  metrics::Gauge& loadBusy_;
  metrics::Family<metrics::Gauge>& shardLoad_;
  std::mutex refreshMu_;
  std::set<std::string> typesShown_;   // under refreshMu_
  std::set<std::string> shardsShown_;  // under refreshMu_
  metrics::Counter& mapChanges_;
  metrics::Counter& mapApi_;
  metrics::Counter& mapBytesManager_;
  metrics::Counter& mapBytesApi_;
  metrics::Gauge& remembered_;
  metrics::Counter& recordStored_;
  metrics::Counter& recordFailed_;
  MapSyncStats mapShown_;  // under refreshMu_
  metrics::Counter& publishes_;
  std::array<metrics::Counter*, kTopicResults> topicDeliveries_{};
  metrics::Gauge& singletonsActive_;
};

}  // namespace kshard::sidecar
