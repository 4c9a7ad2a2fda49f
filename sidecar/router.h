// Router: sends one entity message to the pod that owns its shard, and keeps trying until it is
// delivered or its send timeout passes.
//
// Each attempt looks the owner up afresh: delivered here when this pod owns the shard, forwarded
// to the owner's sidecar otherwise. An attempt is retried, with exponential backoff and jitter,
// only when the message surely was not processed: no owner is known yet, the owner refused it
// (EntityNotManagedByThisPod: a handoff is under way), or the owner could not be reached. An
// unreachable owner is reported to the operator. A failure after the message may have reached the
// app is returned to the caller as is, never retried: retrying could apply a message twice.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/log_throttle.h"
#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/unique_function.h"
#include "http/message.h"
#include "sidecar/entity_registry.h"
#include "sidecar/peer_client.h"
#include "sidecar/retry_schedule.h"
#include "sidecar/routing_table.h"
#include "sidecar/sidecar_error.h"
#include "sidecar/sidecar_metrics.h"

namespace kshard::sidecar {

struct RouterOptions {
  std::string selfPod;  // this pod's name
  Duration initialBackoff = std::chrono::milliseconds(10);
  Duration maxBackoff = std::chrono::milliseconds(500);
};

class Router {
 public:
  using Done = UniqueFunction<void(http::Response&&)>;

  Router(RoutingTable& table, EntityRegistry& registry, PeerClient& peers,
         UnhealthyReporter& reporter, Scheduler& scheduler, Random& random, RouterOptions options,
         SidecarMetrics& metrics, Logger logger);

  // Sends `message` (its shard already computed) and calls `done` exactly once: with the app's
  // response (plus Kshard-Owner), 202 for an accepted tell, or a sidecar error: 504 SendTimeout,
  // 503 EntityOverloaded, 502 when the owner failed after the message may have arrived.
  void send(Message message, Duration sendTimeout, Done done);

 private:
  struct Attempt;
  void attempt(const std::shared_ptr<Attempt>& a);
  void retry(const std::shared_ptr<Attempt>& a, std::string_view reason);
  void finish(const std::shared_ptr<Attempt>& a, http::Response&& response, MessageResult result);

  RoutingTable& table_;
  EntityRegistry& registry_;
  PeerClient& peers_;
  UnhealthyReporter& reporter_;
  Scheduler& scheduler_;
  RouterOptions options_;
  SidecarMetrics& metrics_;
  Logger log_;
  RetrySchedule schedule_;
  // "message not delivered": at most one line per 5 s, with the messages it stands for, so that
  // an outage does not cost a line per message.
  std::mutex failureLogMu_;
  LogThrottle failureLog_{std::chrono::seconds(5)};
};

}  // namespace kshard::sidecar
