#include "sidecar/sidecar_metrics.h"

namespace kshard::sidecar {
namespace {

constexpr const char* kPathNames[] = {"local", "forwarded", "received"};
constexpr const char* kResultNames[] = {"ok",         "app_error", "refused",
                                        "overloaded", "timeout",   "failed"};
constexpr const char* kReasonNames[] = {"no_owner", "not_managed", "unreachable", "caller_refused"};

}  // namespace

SidecarMetrics::SidecarMetrics(metrics::Registry& registry)
    : passivations_(registry
                        .counter("kshard_sidecar_passivations_total",
                                 "Entities stopped because they were idle for entityIdleTimeout.")
                        .with({})),
      handoffOk_(registry
                     .counter("kshard_sidecar_handoffs_total",
                              "Shard handoffs (unassign, revocation, drain) by result.")
                     .with({{"result", "ok"}})),
      handoffTimeout_(
          registry.counter("kshard_sidecar_handoffs_total", "").with({{"result", "timeout"}})),
      ownedShards_(registry.gauge("kshard_sidecar_owned_shards", "Shards this pod owns.").with({})),
      activeEntities_(registry.gauge("kshard_sidecar_active_entities",
                                     "Entities active on this pod, by entity type.")) {
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

void SidecarMetrics::countMessage(MessagePath path, MessageResult result) {
  messages_[static_cast<std::size_t>(path)][static_cast<std::size_t>(result)]->inc();
}

void SidecarMetrics::observeLatency(MessagePath path, double seconds) {
  latency_[static_cast<std::size_t>(path)]->observe(seconds);
}

void SidecarMetrics::refresh(const std::vector<std::pair<std::string, std::size_t>>& activeByType,
                             std::size_t ownedShards) {
  std::lock_guard lock(refreshMu_);
  std::set<std::string> shown;
  for (const auto& [type, count] : activeByType) {
    activeEntities_.with({{"type", type}}).set(static_cast<double>(count));
    shown.insert(type);
  }
  for (const auto& type : typesShown_) {
    if (!shown.count(type)) activeEntities_.remove({{"type", type}});
  }
  typesShown_ = std::move(shown);
  ownedShards_.set(static_cast<double>(ownedShards));
}

void SidecarMetrics::countRetry(RetryReason reason) {
  retries_[static_cast<std::size_t>(reason)]->inc();
}

}  // namespace kshard::sidecar
