#include "sidecar/router.h"

#include <algorithm>

#include "protocol/wire.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;

namespace {

// An answer that came from the app (directly or through the owner's sidecar).
MessageResult appResult(const http::Response& r) {
  return r.status < 300 ? MessageResult::kOk : MessageResult::kAppError;
}

}  // namespace

struct Router::Attempt {
  Message message;
  SteadyTime start;
  SteadyTime deadline;
  Duration sendTimeout{};
  Duration backoff{};
  Done done;
  MessagePath path = MessagePath::kLocal;
  // The pod the message was last forwarded to, in the routing view it was chosen from (kept
  // with it: a pointer, not a copy of the name per message).
  std::shared_ptr<const RoutingSnapshot> route;
  const RouteOwner* owner = nullptr;
  int retries = 0;
  std::string lastReason = "no attempt";
};

Router::Router(RoutingTable& table, EntityRegistry& registry, PeerClient& peers,
               UnhealthyReporter& reporter, Scheduler& scheduler, Random& random,
               RouterOptions options, SidecarMetrics& metrics, Logger logger)
    : table_(table),
      registry_(registry),
      peers_(peers),
      reporter_(reporter),
      scheduler_(scheduler),
      options_(std::move(options)),
      metrics_(metrics),
      log_(std::move(logger)),
      schedule_(random, options_.initialBackoff, options_.maxBackoff) {}

void Router::send(Message message, Duration sendTimeout, Done done) {
  auto a = std::make_shared<Attempt>();
  a->message = std::move(message);
  a->start = scheduler_.clock().now();
  a->deadline = a->start + sendTimeout;
  a->sendTimeout = sendTimeout;
  a->backoff = schedule_.initial();
  a->done = std::move(done);
  attempt(a);
}

void Router::attempt(const std::shared_ptr<Attempt>& a) {
  const ShardId shard = a->message.shard;
  if (registry_.owns(shard)) {
    a->path = MessagePath::kLocal;
    registry_.deliver(a->message, [this, a](DeliveryOutcome&& o) {
      if (isOverload(o.refusal)) {
        finish(a, sidecarError(503, overloadCode(*o.refusal), overloadMessage(*o.refusal)),
               MessageResult::kOverloaded);
      } else if (o.refusal) {
        // The shard began a handoff between owns() and deliver(): the next owner will take it.
        metrics_.countRetry(RetryReason::kNotManaged);
        retry(a, "handoff in progress here");
      } else if (!o.response.ok()) {
        finish(a, appFailure(o.response.status()), MessageResult::kFailed);
      } else {
        http::Response r = std::move(*o.response);
        r.headers.set(std::string(protocol::kOwnerHeader), options_.selfPod);
        finish(a, std::move(r), appResult(r));
      }
    });
    return;
  }

  auto snapshot = table_.snapshot();
  const RouteOwner* owner = snapshot->ownerOf(shard);
  if (owner == nullptr || owner->pod == options_.selfPod) {
    // No owner yet, or the map names this pod before its assign arrived: wait for either.
    metrics_.countRetry(RetryReason::kNoOwner);
    retry(a, owner == nullptr ? "shard has no owner" : "assignment to this pod not yet received");
    return;
  }
  a->path = MessagePath::kForwarded;
  const auto epoch = static_cast<Epoch>(snapshot->epoch);
  a->route = std::move(snapshot);
  a->owner = owner;
  const Duration remaining = a->deadline - scheduler_.clock().now();
  peers_.forward(*owner, std::shared_ptr<const Message>(a, &a->message), epoch,
                 std::max(remaining, Duration(std::chrono::milliseconds(1))),
                 [this, a](ForwardResult&& r) {
                   const std::string& pod = a->owner->pod;
                   switch (r.outcome) {
                     case ForwardOutcome::kAnswered:
                       finish(a, std::move(r.response), appResult(r.response));
                       return;
                     case ForwardOutcome::kNotManaged:
                       metrics_.countRetry(RetryReason::kNotManaged);
                       retry(a, "owner " + pod + " refused: " + r.detail);
                       return;
                     case ForwardOutcome::kCallerRefused:
                       metrics_.countRetry(RetryReason::kCallerRefused);
                       retry(a, "owner " + pod + " refused this sidecar: " + r.detail);
                       return;
                     case ForwardOutcome::kUnreachable:
                       metrics_.countRetry(RetryReason::kUnreachable);
                       reporter_.reportUnreachable(pod);
                       retry(a, "owner " + pod + " unreachable: " + r.detail);
                       return;
                     // The owner may have taken the message: it is never sent again, and the
                     // caller learns that its outcome is unknown.
                     case ForwardOutcome::kTimedOut:
                       finish(a,
                              sidecarError(504, errors::kOutcomeUnknown,
                                           "owner " + pod +
                                               " did not answer in time; the message may have "
                                               "been applied"),
                              MessageResult::kTimeout);
                       return;
                     case ForwardOutcome::kFailed:
                       finish(a,
                              sidecarError(502, errors::kOutcomeUnknown,
                                           "the exchange with owner " + pod + " broke (" +
                                               r.detail + "); the message may have been applied"),
                              MessageResult::kFailed);
                       return;
                   }
                 });
}

void Router::retry(const std::shared_ptr<Attempt>& a, std::string_view reason) {
  a->lastReason = std::string(reason);
  const Duration wait = schedule_.wait(a->backoff);
  if (scheduler_.clock().now() + wait >= a->deadline) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(a->sendTimeout).count();
    finish(a,
           sidecarError(504, errors::kSendTimeout,
                        "not delivered within the send timeout of " + std::to_string(ms) +
                            " ms after " + std::to_string(a->retries + 1) +
                            " attempts; last: " + a->lastReason),
           MessageResult::kTimeout);
    return;
  }
  ++a->retries;
  a->backoff = schedule_.next(a->backoff);
  scheduler_.runAfter(wait, [this, a] { attempt(a); });
}

void Router::finish(const std::shared_ptr<Attempt>& a, http::Response&& response, MessageResult m) {
  metrics_.countMessage(a->path, m);
  const auto elapsed = scheduler_.clock().now() - a->start;
  metrics_.observeLatency(a->path, std::chrono::duration<double>(elapsed).count());
  if (m == MessageResult::kTimeout || m == MessageResult::kFailed) {
    std::uint64_t failures = 0;
    {
      std::lock_guard lock(failureLogMu_);
      failures = failureLog_.occur(scheduler_.clock().now());
    }
    if (failures > 0) {
      log_.warn("message not delivered", {{"type", a->message.key.type},
                                          {"id", a->message.key.id},
                                          {"shard", a->message.shard},
                                          {"attempts", a->retries + 1},
                                          {"reason", a->lastReason},
                                          {"failures", failures}});
    }
  }
  a->done(std::move(response));
}

}  // namespace kshard::sidecar
