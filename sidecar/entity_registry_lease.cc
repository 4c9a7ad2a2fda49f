// EntityRegistry: the ownership lease (sidecar/ownership_lease.h) — its duration and renewals,
// the fence that stops every entity before it runs out, and the queued messages it refuses.
#include "sidecar/entity_registry.h"

namespace kshard::sidecar {

void EntityRegistry::refuseQueuedLocked(Pending p, Actions& out, Refusal refusal) {
  if (p.heldAck) {
    // A tell not answered yet (its entity's record was pending): refused, the sender retries.
    --pendingTells_;
    pendingTellBytes_ -= p.message.body.size();
    p.done = std::move(p.heldAck);
  }
  if (p.done) {
    out.push_back([done = std::move(p.done), refusal]() mutable {
      done(DeliveryOutcome{refusal, http::Response{}});
    });
    return;
  }
  // A tell was answered 202 when it was queued; it is lost like the tells of a crashed pod.
  --pendingTells_;
  pendingTellBytes_ -= p.message.body.size();
  ++droppedTells_;
  if (const std::uint64_t n = fenceDropLog_.occur(scheduler_.clock().now())) {
    log_.warn("tell dropped: the ownership lease ran out before it reached the app",
              {{"type", p.message.key.type},
               {"id", p.message.key.id},
               {"failures", n},
               {"dropped_total", droppedTells_}});
  }
}

bool EntityRegistry::acceptingLocked() const {
  return !lease_.enabled() || (!fenced_ && lease_.acceptsAt(scheduler_.clock().now()));
}

bool EntityRegistry::deliveringLocked() const {
  return !lease_.enabled() || lease_.deliversAt(scheduler_.clock().now());
}

void EntityRegistry::setLeaseDuration(Duration duration) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (duration == lease_.duration()) return;
    const bool wasAccepting = acceptingLocked();
    lease_.setDuration(duration);
    publishDeadlineLocked();
    armFenceLocked();
    if (!wasAccepting && acceptingLocked()) notifyAllOwnedLocked(actions);
  }
  run(actions);
}

void EntityRegistry::publishDeadlineLocked() {
  const Duration::rep until = !lease_.enabled()    ? Duration::max().count()
                              : lease_.confirmed() ? lease_.until().time_since_epoch().count()
                                                   : 0;
  appDeadline_.store(until, std::memory_order_release);
}

void EntityRegistry::renewLease(SteadyTime sentAt) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const bool wasAccepting = acceptingLocked();
    if (!lease_.renew(sentAt)) return;
    publishDeadlineLocked();
    if (fenced_ && lease_.acceptsAt(scheduler_.clock().now())) {
      fenced_ = false;
      log_.info("ownership confirmed again; delivering messages");
    }
    armFenceLocked();
    // The first confirmation, or one that lifts the fence: entities may run again.
    if (!wasAccepting && acceptingLocked()) notifyAllOwnedLocked(actions);
  }
  run(actions);
}

bool EntityRegistry::leaseValid() const {
  std::lock_guard lock(mu_);
  return acceptingLocked();
}

void EntityRegistry::armFenceLocked() {
  if (!lease_.enabled()) return;
  const std::uint64_t seq = ++fenceSeq_;
  const Duration delay = std::max(Duration::zero(), lease_.fenceAt() - scheduler_.clock().now());
  scheduleLocked(
      delay, [this, seq] { onFenceTimer(seq); }, nullptr);
}

void EntityRegistry::onFenceTimer(std::uint64_t seq) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (seq != fenceSeq_ || fenced_ || lease_.acceptsAt(scheduler_.clock().now())) return;
    // No confirmation for nearly a whole lease: the operator may soon treat this pod as gone.
    // Its entities stop now, so that none runs here once the lease has run out; the shards stay
    // owned, and the next renewal lifts the fence.
    fenced_ = true;
    log_.warn("ownership not confirmed in time: taking no messages and stopping entities",
              {{"active_entities", static_cast<std::uint64_t>(entities_.size())},
               {"owned_shards", static_cast<std::uint64_t>(shards_.size())}});
    refuseWaitersLocked(nullptr, actions);  // none has reached the app or been acknowledged
    for (auto& [key, e] : entities_) {
      if (!e.busy && e.mailbox.empty()) beginStopLocked(e, true, actions);
    }
  }
  run(actions);
}

}  // namespace kshard::sidecar
