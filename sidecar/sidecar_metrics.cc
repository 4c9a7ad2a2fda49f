#include "sidecar/sidecar_metrics.h"

#include <algorithm>

namespace kshard::sidecar {
namespace {

constexpr const char* kPathNames[] = {"local", "forwarded", "received"};
constexpr const char* kResultNames[] = {"ok",         "app_error", "refused",
                                        "overloaded", "timeout",   "failed"};
constexpr const char* kReasonNames[] = {"no_owner", "not_managed", "unreachable", "caller_refused"};
constexpr const char* kTopicResultNames[] = {"accepted", "refused", "unknown", "not_sent"};

// Sets `values` on the family's series of label `label`, and removes the series of values shown
// before and missing now; `shown` holds the values with a series.
void replaceSeries(metrics::Family<metrics::Gauge>& family, const std::string& label,
                   const std::vector<std::pair<std::string, double>>& values,
                   std::set<std::string>& shown) {
  std::set<std::string> now;
  for (const auto& [value, number] : values) {
    family.with({{label, value}}).set(number);
    now.insert(value);
  }
  for (const auto& value : shown) {
    if (!now.count(value)) family.remove({{label, value}});
  }
  shown = std::move(now);
}

}  // namespace

SidecarMetrics::SidecarMetrics(metrics::Registry& registry)
    : passivations_(registry
                        .counter("kshard_sidecar_passivations_total",
                                 "Entities stopped because they were idle for entityIdleTimeout.")
                        .with({})),
      limitPassivations_(registry
                             .counter("kshard_sidecar_entity_limit_passivations_total",
                                      "Idle entities stopped, least recently used first, to make "
                                      "a place for a new one under maxActiveEntitiesPerPod.")
                             .with({})),
      waitingEntities_(registry
                           .gauge("kshard_sidecar_waiting_entities",
                                  "New entities waiting for a place under "
                                  "maxActiveEntitiesPerPod.")
                           .with({})),
      handoffOk_(registry
                     .counter("kshard_sidecar_handoffs_total",
                              "Shard handoffs (unassign, revocation, drain) by result.")
                     .with({{"result", "ok"}})),
      handoffTimeout_(
          registry.counter("kshard_sidecar_handoffs_total", "").with({{"result", "timeout"}})),
      ownedShards_(registry.gauge("kshard_sidecar_owned_shards", "Shards this pod owns.").with({})),
      activeEntities_(registry.gauge("kshard_sidecar_active_entities",
                                     "Entities active on this pod, by entity type.")),
      loadMessages_(registry
                        .gauge("kshard_sidecar_load_messages_per_second",
                               "Messages a second to this pod's shards, a decayed average.")
                        .with({})),
      loadBusy_(registry
                    .gauge("kshard_sidecar_load_busy_ratio",
                           "Seconds a second the app spends on this pod's shards' messages.")
                    .with({})),
      shardLoad_(registry.gauge("kshard_sidecar_shard_load_busy_ratio",
                                "The busy ratio of this pod's busiest shards, by shard.")),
      mapChanges_(registry
                      .counter("kshard_sidecar_map_versions_total",
                               "ShardMap versions taken, by how they came: changes from the "
                               "manager, or the object from the API server.")
                      .with({{"source", "changes"}})),
      mapApi_(registry.counter("kshard_sidecar_map_versions_total", "").with({{"source", "api"}})),
      mapBytesManager_(registry
                           .counter("kshard_sidecar_map_bytes_total",
                                    "Bytes of the ShardMap's versions read, by source.")
                           .with({{"source", "manager"}})),
      mapBytesApi_(
          registry.counter("kshard_sidecar_map_bytes_total", "").with({{"source", "api"}})),
      remembered_(registry
                      .gauge("kshard_sidecar_remembered_entities",
                             "Remembered entities in the records of the shards this pod owns.")
                      .with({})),
      recordStored_(registry
                        .counter("kshard_sidecar_remembered_record_writes_total",
                                 "Writes of the owned shards' remembered entities (ShardEntities "
                                 "records), by result: stored, or failed (a conflict, an API "
                                 "error).")
                        .with({{"result", "stored"}})),
      recordFailed_(registry.counter("kshard_sidecar_remembered_record_writes_total", "")
                        .with({{"result", "failed"}})),
      publishes_(registry
                     .counter("kshard_sidecar_topic_publishes_total",
                              "Topic publications this pod's app published.")
                     .with({})),
      singletonsActive_(registry
                            .gauge("kshard_sidecar_singletons_active",
                                   "Singletons (spec.singletons) active on this pod.")
                            .with({})) {
  resolveLabelledSeries(registry);
}

void SidecarMetrics::resolveLabelledSeries(metrics::Registry& registry) {
  auto& deliveries = registry.counter(
      "kshard_sidecar_topic_deliveries_total",
      "Topic publications sent to each pod of the ShardMap, by what the pod made of them as the "
      "publisher saw it (accepted; refused; unknown: may have been delivered; not_sent).");
  for (std::size_t r = 0; r < kTopicResults; ++r)
    topicDeliveries_[r] = &deliveries.with({{"result", kTopicResultNames[r]}});
  auto& messages = registry.counter(
      "kshard_sidecar_messages_total",
      "Entity messages by path (local: delivered here for this pod's app; forwarded: sent to "
      "the owner's sidecar; received: delivered here for another sidecar) and result.");
  auto& latency = registry.histogram("kshard_sidecar_message_duration_seconds",
                                     "Time from receiving a message to answering it, by path.",
                                     metrics::latencyBuckets());
  auto& retries =
      registry.counter("kshard_sidecar_retries_total", "Send attempts retried, by reason.");
  for (std::size_t p = 0; p < kPaths; ++p) {
    for (std::size_t r = 0; r < kResults; ++r) {
      messages_[p][r] = &messages.with({{"path", kPathNames[p]}, {"result", kResultNames[r]}});
    }
    latency_[p] = &latency.with({{"path", kPathNames[p]}});
  }
  for (std::size_t r = 0; r < kReasons; ++r)
    retries_[r] = &retries.with({{"reason", kReasonNames[r]}});
}

void SidecarMetrics::showMapSync(const MapSyncStats& stats) {
  std::lock_guard lock(refreshMu_);
  const auto add = [](metrics::Counter& c, std::uint64_t now, std::uint64_t& shown) {
    if (now > shown) c.inc(static_cast<double>(now - shown));
    shown = now;
  };
  add(mapChanges_, stats.deltas, mapShown_.deltas);
  add(mapApi_, stats.apiReads, mapShown_.apiReads);
  add(mapBytesManager_, stats.bytesManager, mapShown_.bytesManager);
  add(mapBytesApi_, stats.bytesApi, mapShown_.bytesApi);
}

void SidecarMetrics::countMessage(MessagePath path, MessageResult result) {
  messages_[static_cast<std::size_t>(path)][static_cast<std::size_t>(result)]->inc();
}

void SidecarMetrics::observeLatency(MessagePath path, double seconds) {
  latency_[static_cast<std::size_t>(path)]->observe(seconds);
}

void SidecarMetrics::refresh(const std::vector<std::pair<std::string, std::size_t>>& activeByType,
                             std::size_t ownedShards) {
  std::lock_guard lock(refreshMu_);
  std::vector<std::pair<std::string, double>> counts;
  for (const auto& [type, count] : activeByType)
    counts.emplace_back(type, static_cast<double>(count));
  replaceSeries(activeEntities_, "type", counts, typesShown_);
  ownedShards_.set(static_cast<double>(ownedShards));
}

void SidecarMetrics::showLoad(const std::vector<ShardLoad>& load) {
  double messages = 0;
  double busy = 0;
  for (const ShardLoad& s : load) {
    messages += s.messagesPerSecond;
    busy += s.busy;
  }
  std::vector<ShardLoad> top(load);
  const auto busiest = [](const ShardLoad& a, const ShardLoad& b) {
    if (a.busy != b.busy) return a.busy > b.busy;
    if (a.messagesPerSecond != b.messagesPerSecond)
      return a.messagesPerSecond > b.messagesPerSecond;
    return a.shard < b.shard;
  };
  const std::size_t n = std::min(top.size(), kTopShards);
  std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(n), top.end(), busiest);
  std::vector<std::pair<std::string, double>> series;
  for (std::size_t i = 0; i < n; ++i)
    series.emplace_back(std::to_string(top[i].shard), top[i].busy);
  std::lock_guard lock(refreshMu_);
  loadMessages_.set(messages);
  loadBusy_.set(busy);
  replaceSeries(shardLoad_, "shard", series, shardsShown_);
}

void SidecarMetrics::countRetry(RetryReason reason) {
  retries_[static_cast<std::size_t>(reason)]->inc();
}

}  // namespace kshard::sidecar
