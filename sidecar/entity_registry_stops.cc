// EntityRegistry: passivation and stops — the idle list and its sweep, the stop queues bounded by
// maxConcurrentStops, a stop's retry, and an entity's removal once stopped.
#include <algorithm>

#include "sidecar/entity_registry.h"

namespace kshard::sidecar {
namespace {

// At most this many entities are passivated per sweep under the lock; more due ones wait for the
// next sweep, which follows at once, so that messages are not held up behind a long sweep.
constexpr std::size_t kMaxPassivationsPerSweep = 1024;
// A stop that failed while its shard hands off is tried again after stopRetryDelay, doubled for
// each failure in a row up to this (and at most kMaxStopRetryDoublings times).
constexpr Duration kMaxStopRetryDelay = std::chrono::seconds(5);
constexpr std::uint8_t kMaxStopRetryDoublings = 16;

// How long after a sweep the next one may come at the earliest: a fraction of the idle timeout,
// from 1 ms to 1 s. Entities that fall idle one after another (a new entity per message) are
// then passivated in batches, at most this late, rather than one sweep per entity.
Duration sweepInterval(Duration idleTimeout) {
  return std::clamp<Duration>(idleTimeout / 64, std::chrono::milliseconds(1),
                              std::chrono::seconds(1));
}

}  // namespace

void EntityRegistry::EntityList::pushBack(Entity& e) {
  if (e.list == id) remove(e);
  e.prev = tail;
  e.next = nullptr;
  if (tail != nullptr) {
    tail->next = &e;
  } else {
    head = &e;
  }
  tail = &e;
  e.list = id;
}

void EntityRegistry::EntityList::remove(Entity& e) {
  if (e.list != id) return;
  (e.prev != nullptr ? e.prev->next : head) = e.next;
  (e.next != nullptr ? e.next->prev : tail) = e.prev;
  e.prev = e.next = nullptr;
  e.list = kInNoList;
}

void EntityRegistry::armSweepLocked(SteadyTime due) {
  if (sweepArmed_ && sweepDue_ <= due) return;
  sweepArmed_ = true;
  sweepDue_ = due;
  const std::uint64_t seq = ++sweepSeq_;
  const Duration delay = std::max(Duration::zero(), due - scheduler_.clock().now());
  scheduleLocked(
      delay, [this, seq] { onSweep(seq); }, nullptr);
}

void EntityRegistry::onSweep(std::uint64_t seq) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (!sweepArmed_ || seq != sweepSeq_) return;  // superseded by an earlier sweep
    sweepArmed_ = false;
    const Duration timeout = options_.idleTimeout;
    if (timeout <= Duration::zero()) return;  // passivation was switched off
    const SteadyTime now = scheduler_.clock().now();
    std::size_t stopped = 0;
    while (idle_.head != nullptr && now - idle_.head->lastActive >= timeout) {
      if (stopped == kMaxPassivationsPerSweep) {
        armSweepLocked(now);
        break;
      }
      Entity& e = *idle_.head;
      beginStopLocked(e, false, actions);
      if (options_.onPassivation) actions.push_back(options_.onPassivation);
      ++stopped;
    }
    if (!sweepArmed_ && idle_.head != nullptr) {
      armSweepLocked(std::max(idle_.head->lastActive + timeout, now + sweepInterval(timeout)));
    }
  }
  run(actions);
}

void EntityRegistry::beginStopLocked(Entity& e, bool handoff, Actions& out) {
  markBusyLocked(e);
  e.stopping = true;
  ++stopping_;
  if (stopsAtApp_ < options_.maxConcurrentStops) {
    sendStopLocked(e, out);
  } else {
    (handoff ? handoffStops_ : passivationStops_).pushBack(e);
  }
}

void EntityRegistry::sendStopLocked(Entity& e, Actions& out) {
  ++stopsAtApp_;
  if (!deliveringLocked()) {
    // Nothing reaches the app once the lease has run out, not even a stop (another pod may run
    // the entity now): it counts as failed, and is retried, with backoff, once renewed.
    out.push_back([this, key = *e.key] {
      onStopped(key, unavailable("the ownership lease has run out: stop not sent"));
    });
    return;
  }
  out.push_back([this, key = *e.key, shard = e.shard, turn = e.lastTurn] {
    host_.stop(key, shard, turn, [this, key](Status st) { onStopped(key, std::move(st)); });
  });
}

void EntityRegistry::stopFinishedLocked(Actions& out) {
  --stopsAtApp_;
  while (stopsAtApp_ < options_.maxConcurrentStops) {
    EntityList& queue = handoffStops_.head != nullptr ? handoffStops_ : passivationStops_;
    if (queue.head == nullptr) return;
    Entity& next = *queue.head;
    queue.remove(next);
    sendStopLocked(next, out);
  }
}

void EntityRegistry::onStopped(const EntityKey& key, Status result) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    stopFinishedLocked(actions);
    // Nothing removes an entity whose stop is at the app, so it is there.
    auto it = entities_.find(key);
    if (it != entities_.end()) afterStopLocked(key, it->second, result, actions);
  }
  run(actions);
}

void EntityRegistry::afterStopLocked(const EntityKey& key, Entity& e, const Status& result,
                                     Actions& out) {
  e.busy = false;
  e.stopping = false;
  --stopping_;
  if (!result.ok()) {
    // It stays active: passivation is tried again after another idle timeout.
    e.lastActive = scheduler_.clock().now();
    if (e.stopFailures < kMaxStopRetryDoublings) ++e.stopFailures;
    pauseEvictionsLocked(e);
    if (const std::uint64_t n = stopFailureLog_.occur(e.lastActive)) {
      log_.warn(
          "entity stop failed",
          {{"type", key.type}, {"id", key.id}, {"error", result.toString()}, {"failures", n}});
    }
    if (mustStopLocked(e.shard)) {
      // The shard cannot be released while the entity may still hold state: retry, backing off
      // (stopRetryDelay, doubled for each failure in a row, at most kMaxStopRetryDelay), so that
      // an app that is down is not asked again for every entity five times a second.
      const Duration delay = std::min<Duration>(
          options_.stopRetryDelay * (Duration::rep{1} << (e.stopFailures - 1)), kMaxStopRetryDelay);
      scheduleLocked(
          delay,
          [this, key] {
            Actions retry;
            {
              std::lock_guard inner(mu_);
              auto r = entities_.find(key);
              if (r != entities_.end() && !r->second.busy) afterTurnLocked(r->second, retry);
            }
            run(retry);
          },
          nullptr);
    } else {
      afterTurnLocked(e, out);
    }
  } else {
    e.atApp = false;
    // Messages that arrived while the entity stopped (its shard is still owned) start it again,
    // if the lease still lets them reach the app.
    while (!e.mailbox.empty() && !deliveringLocked()) {
      refuseQueuedLocked(e.mailbox.take(), out);
    }
    // A pinned entity stopped while its shard may run again (the fence lifted, the shard taken
    // back during its handoff) is started again.
    if (e.pinned && canRunLocked(e.shard)) {
      e.needsStart = true;
      e.startBackoff = false;
    }
    if (!e.mailbox.empty() || startOwedLocked(e)) {
      startNextLocked(e, out);
    } else {
      removeEntityLocked(key, out);
    }
  }
  // A place is free now, or the stop that was to free one did not: admit, or passivate another.
  if (overLimitLocked()) enforceLimitLocked(out);
}

void EntityRegistry::removeEntityLocked(const EntityKey& key, Actions& out) {
  auto it = entities_.find(key);
  const ShardId shard = it->second.shard;
  idle_.remove(it->second);
  handoffStops_.remove(it->second);
  passivationStops_.remove(it->second);
  if (--*it->second.typeCount == 0) typeCounts_.erase(it->first.type);
  entities_.erase(it);
  auto sit = shards_.find(shard);
  if (sit != shards_.end() && --sit->second.entities == 0 &&
      sit->second.state == ShardState::kHandingOff) {
    shards_.erase(sit);
    completeHandoffsLocked(out);
  }
  // A place is free under the active-entity limit: a waiting entity takes it.
  if (overLimitLocked()) enforceLimitLocked(out);
}

void EntityRegistry::setIdleTimeout(Duration timeout) {
  std::lock_guard lock(mu_);
  if (timeout == options_.idleTimeout) return;
  options_.idleTimeout = timeout;
  if (timeout <= Duration::zero()) {
    sweepArmed_ = false;  // the armed sweep, if any, is now stale
  } else if (idle_.head != nullptr) {
    armSweepLocked(idle_.head->lastActive + timeout);  // earlier, if the timeout got shorter
  }
}

}  // namespace kshard::sidecar
