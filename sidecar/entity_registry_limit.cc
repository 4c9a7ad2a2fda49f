// EntityRegistry: the active-entity limit (spec.maxActiveEntitiesPerPod) — new entities waiting
// for a place, their admission, and the passivation of least recently used idle entities that
// makes room.
//
// What counts: every entity in entities_, from its creation (its first message goes to the app)
// until its stop call has returned OK; a stopping entity, or one whose stop failed, still counts.
// deliver() creates an entity only below the limit with none waiting, and enforceLimitLocked()
// admits a waiter only below it, so the app never runs more than the limit at once; a lowered
// limit is reached as the entities above it stop.
#include <algorithm>

#include "sidecar/entity_recorder.h"
#include "sidecar/entity_registry.h"

namespace kshard::sidecar {
namespace {

// As a failed handoff stop's retry (entity_registry_stops.cc): after a failed stop, the limit's
// passivations pause for stopRetryDelay, doubled per failure in a row of that entity, at most
// this.
constexpr Duration kMaxEvictionPause = std::chrono::seconds(5);

}  // namespace

bool EntityRegistry::mustWaitLocked(const EntityKey& key) const {
  if (options_.maxActiveEntities == 0) return false;
  // First come, first admitted: a new entity does not pass the ones already waiting.
  return entities_.size() >= options_.maxActiveEntities || !waitQueue_.empty() ||
         waiting_.count(key) > 0;
}

std::optional<Refusal> EntityRegistry::waitForPlaceLocked(Message& message, DeliveryCallback& done,
                                                          Actions& out) {
  // The waiting messages are bounded all together by one mailbox's bound: they hold memory
  // while no entity of theirs runs.
  if (waitingMessages_ >= options_.maxMailbox) return Refusal::kEntityLimit;
  auto it = waiting_.find(message.key);
  if (it == waiting_.end()) {
    waitQueue_.push_back(Waiter{message.key, message.shard, {}, false});
    it = waiting_.emplace(message.key, std::prev(waitQueue_.end())).first;
  }
  if (message.mode == DeliveryMode::kTell) {
    // Counted in the tells' backlog already, so that waiting tells are bounded in bytes too.
    ++pendingTells_;
    pendingTellBytes_ += message.body.size();
  }
  ++waitingMessages_;
  // A tell's answer is held (Pending::heldAck) until its entity is admitted.
  const bool tell = message.mode == DeliveryMode::kTell;
  it->second->messages.push_back(Pending{std::move(message), tell ? nullptr : std::move(done),
                                         tell ? std::move(done) : nullptr});
  enforceLimitLocked(out);
  return std::nullopt;
}

void EntityRegistry::enforceLimitLocked(Actions& out) {
  // A waiter may be admitted only while messages are taken: past the lease's fence its shard
  // may soon be another pod's. (The fence refuses the waiters; this covers its timer's delay.)
  if (!acceptingLocked()) {
    refuseWaitersLocked(nullptr, out);
    return;
  }
  const std::size_t limit = options_.maxActiveEntities;
  while (!waitQueue_.empty() && (limit == 0 || entities_.size() < limit)) {
    admitFirstWaiterLocked(out);
  }
  if (limit == 0) return;
  // Each stop under way frees a place when it returns (if it does not, the limit is enforced
  // again then): passivate until those stops make room for every waiter, and bring a lowered
  // limit down.
  const std::size_t wanted = entities_.size() + waitQueue_.size();
  if (wanted <= limit + stopping_) return;
  const SteadyTime now = scheduler_.clock().now();
  if (now < evictionsPausedUntil_) {
    if (!evictionTimerArmed_) {
      evictionTimerArmed_ = true;
      scheduleLocked(
          evictionsPausedUntil_ - now,
          [this] {
            Actions actions;
            {
              std::lock_guard lock(mu_);
              evictionTimerArmed_ = false;
              enforceLimitLocked(actions);
            }
            run(actions);
          },
          nullptr);
    }
    return;
  }
  for (std::size_t need = wanted - limit - stopping_; need > 0; --need) {
    Entity* victim = leastRecentlyUsedLocked();
    if (victim == nullptr) return;  // the rest are busy or pinned: one falls idle later
    beginStopLocked(*victim, false, out);
    if (options_.onLimitPassivation) out.push_back(options_.onLimitPassivation);
  }
}

EntityRegistry::Entity* EntityRegistry::leastRecentlyUsedLocked() {
  // Pinned entities stay out of the idle list (keepActive); skipped here all the same.
  for (Entity* e = idle_.head; e != nullptr; e = e->next) {
    if (!e->pinned) return e;
  }
  return nullptr;
}

void EntityRegistry::admitFirstWaiterLocked(Actions& out) {
  Waiter w = std::move(waitQueue_.front());
  waitQueue_.pop_front();
  waiting_.erase(w.key);
  waitingMessages_ -= w.messages.size();
  // Waiters of a shard that began handing off were refused then, and none comes while it does
  // (nor while the pod drains); checked all the same, as only an owned shard's entity may start.
  if (!canRunLocked(w.shard)) {
    for (Pending& p : w.messages) refuseQueuedLocked(std::move(p), out);
    return;
  }
  Shard& shard = shards_.at(w.shard);
  Entity& e = createEntityLocked(w.key, w.shard, shard);
  if (w.keep) {
    // As keepActive: a start turn first, pinned (recorded by whoever kept it active).
    e.pinned = true;
    e.needsStart = true;
  } else if (recorder_ != nullptr && recorder_->remembered(e.key->type)) {
    e.needsRecord = true;  // as deliver(): recorded before its first turn
  } else if (e.key->type == kSingletonEntityType) {
    e.needsStart = true;  // as deliver(): a singleton a message reached first is started first
  }
  for (Pending& p : w.messages) {
    ++shard.messages;
    // A tell is accepted now (or once recorded, releaseHeldAcksLocked): from then on a handoff or
    // the drain lets it reach the app first.
    if (p.heldAck && !e.needsRecord) {
      out.push_back([ack = std::move(p.heldAck)]() mutable {
        http::Response accepted;
        accepted.status = 202;
        ack(DeliveryOutcome{std::nullopt, std::move(accepted)});
      });
      p.heldAck = nullptr;
    }
    e.mailbox.push(std::move(p));
  }
  startNextLocked(e, out);
}

void EntityRegistry::keepWhenAdmittedLocked(const EntityKey& key, ShardId shard, Actions& out) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) {
    waitQueue_.push_back(Waiter{key, shard, {}, true});
    waiting_.emplace(key, std::prev(waitQueue_.end()));
  } else {
    it->second->keep = true;
  }
  enforceLimitLocked(out);
}

void EntityRegistry::unkeepWaiterLocked(const EntityKey& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  it->second->keep = false;
  if (!it->second->messages.empty()) return;  // it still waits for its messages
  waitQueue_.erase(it->second);
  waiting_.erase(it);
}

void EntityRegistry::refuseWaitersLocked(const std::unordered_set<ShardId>* shards, Actions& out) {
  for (auto it = waitQueue_.begin(); it != waitQueue_.end();) {
    if (shards != nullptr && shards->count(it->shard) == 0) {
      ++it;
      continue;
    }
    waitingMessages_ -= it->messages.size();
    waiting_.erase(it->key);
    // Asks and unanswered tells alike are refused: the sender retries them at the next owner.
    for (Pending& p : it->messages) refuseQueuedLocked(std::move(p), out);
    it = waitQueue_.erase(it);
  }
}

void EntityRegistry::pauseEvictionsLocked(const Entity& failed) {
  if (options_.maxActiveEntities == 0) return;
  const int doublings = std::max(0, failed.stopFailures - 1);
  const Duration pause = std::min<Duration>(
      options_.stopRetryDelay * (Duration::rep{1} << std::min(doublings, 16)), kMaxEvictionPause);
  evictionsPausedUntil_ = std::max(evictionsPausedUntil_, scheduler_.clock().now() + pause);
}

void EntityRegistry::setMaxActiveEntities(std::size_t limit) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (limit == options_.maxActiveEntities) return;
    log_.info("active entity limit changed",
              {{"limit", static_cast<std::uint64_t>(limit)},
               {"active_entities", static_cast<std::uint64_t>(entities_.size())},
               {"waiting_entities", static_cast<std::uint64_t>(waitQueue_.size())}});
    options_.maxActiveEntities = limit;
    enforceLimitLocked(actions);
  }
  run(actions);
}

std::size_t EntityRegistry::waitingEntities() const {
  std::lock_guard lock(mu_);
  return waitQueue_.size();
}

}  // namespace kshard::sidecar
