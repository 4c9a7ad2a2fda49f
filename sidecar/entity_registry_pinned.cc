// EntityRegistry: entities that run without a message — keepActive and its start turns, the
// pinned entities that idleness does not stop, the shards-taken listeners that start them, the
// record of remembered entities (sidecar/entity_recorder.h), and the passivation an app asks for
// (Kshard-Passivate).
//
// None of it bends the single-owner rule: a start turn runs only while the shard is owned (not
// handing off, not fenced, not draining), and is a turn like a message's, so a handoff, the
// drain and the lease's fence wait for it and then stop the entity as any other.
#include <algorithm>
#include <map>

#include "http/message.h"
#include "sidecar/entity_recorder.h"
#include "sidecar/entity_registry.h"

namespace kshard::sidecar {
namespace {

// A start that failed is tried again after this, doubled for each failure in a row up to
// kMaxStartRetryDelay.
constexpr Duration kStartRetryDelay = std::chrono::milliseconds(200);
constexpr Duration kMaxStartRetryDelay = std::chrono::seconds(5);
constexpr std::uint8_t kMaxStartRetryDoublings = 16;

bool asksPassivation(const StatusOr<http::Response>& result) {
  if (!result.ok()) return false;
  const auto value = result->headers.get(protocol::kPassivateHeader);
  return value && http::equalsIgnoreCase(*value, "true");
}

}  // namespace

void EntityHost::start(const EntityKey&, ShardId, Epoch, std::uint64_t, StartCallback done) {
  done(failedPrecondition("this host does not start entities without a message"));
}

void EntityRegistry::addShardsTakenListener(ShardsTakenListener listener) {
  std::lock_guard lock(mu_);
  takenListeners_.push_back(std::move(listener));
}

void EntityRegistry::setRecorder(EntityRecorder* recorder) {
  std::lock_guard lock(mu_);
  recorder_ = recorder;
}

EntityRegistry::Entity& EntityRegistry::createEntityLocked(const EntityKey& key, ShardId id,
                                                           Shard& shard) {
  auto it = entities_.try_emplace(key).first;
  Entity& e = it->second;
  e.key = &it->first;
  e.shard = id;
  e.lastActive = scheduler_.clock().now();
  std::size_t& typeCount = typeCounts_.try_emplace(key.type, 0).first->second;
  ++typeCount;
  e.typeCount = &typeCount;
  ++shard.entities;
  return e;
}

bool EntityRegistry::takingLocked(ShardId shard) const {
  auto it = shards_.find(shard);
  return it != shards_.end() && it->second.state == ShardState::kOwned && acceptingLocked();
}

bool EntityRegistry::canRunLocked(ShardId shard) const { return takingLocked(shard) && !draining_; }

bool EntityRegistry::keepActive(EntityKey key, ShardId shard) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    // The same rule as a new message's: an entity starts only on a shard this pod owns, and
    // not once its lease's fence has begun or its drain.
    if (!canRunLocked(shard)) return false;
    auto it = entities_.find(key);
    if (it != entities_.end()) {
      Entity& e = it->second;
      e.pinned = true;
      idle_.remove(e);
      if (auto c = recorderCalls_.find(key); c != recorderCalls_.end()) c->second.unpinned = false;
      // A start still owed (it failed while the shard could not run, so no retry was armed)
      // runs now.
      if (!e.busy && startOwedLocked(e)) startNextLocked(e, actions);
    } else if (mustWaitLocked(key)) {
      // At the active-entity limit: it starts once a place is free (entity_registry_limit.cc).
      keepWhenAdmittedLocked(key, shard, actions);
    } else {
      Entity& e = createEntityLocked(key, shard, shards_.at(shard));
      e.pinned = true;
      e.needsStart = true;
      startNextLocked(e, actions);
    }
  }
  run(actions);
  return true;
}

void EntityRegistry::unpin(const EntityKey& key, bool stop) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    auto it = entities_.find(key);
    if (it == entities_.end()) {
      unkeepWaiterLocked(key);
      return;
    }
    // A record or forget in flight does not pin it again when it lands.
    if (auto c = recorderCalls_.find(key); c != recorderCalls_.end()) c->second.unpinned = true;
    if (!it->second.pinned) return;
    Entity& e = it->second;
    e.pinned = false;
    e.needsStart = false;
    if (e.stopping) return;  // stops already
    if (stop && e.busy) {
      if (e.afterTurn == kContinue) e.afterTurn = kStopAfterTurn;
    } else if (stop) {
      beginStopLocked(e, mustStopLocked(e.shard), actions);
    } else if (!e.busy) {
      afterTurnLocked(e, actions);  // to the idle list
    }
  }
  run(actions);
}

bool EntityRegistry::pinned(const EntityKey& key) const {
  std::lock_guard lock(mu_);
  auto it = entities_.find(key);
  return it != entities_.end() && it->second.pinned;
}

void EntityRegistry::beginStartLocked(Entity& e, Actions& out) {
  markBusyLocked(e);
  const Epoch epoch = shards_.at(e.shard).epoch;
  const std::uint64_t turn = nextTurnLocked(e);
  // The host gets a key of its own: an answer given at once may remove the entity (a stop that
  // follows at once) before start() returns. Until the answer the entity is busy: nothing
  // removes it, and its node does not move.
  out.push_back([this, entity = &e, key = *e.key, shard = e.shard, epoch, turn] {
    host_.start(key, shard, epoch, turn,
                [this, entity](StatusOr<http::Response>&& r) { onStarted(*entity, std::move(r)); });
  });
}

void EntityRegistry::onStarted(Entity& e, StatusOr<http::Response> result) {
  Actions actions;
  std::uint64_t failures = 0;
  {
    std::lock_guard lock(mu_);
    const SteadyTime now = scheduler_.clock().now();
    if (auto sit = shards_.find(e.shard); sit != shards_.end())
      sit->second.busy += now - e.lastActive;
    e.busy = false;
    e.lastActive = now;
    if (result.ok()) {
      e.needsStart = false;
      e.startFailures = 0;
      e.stopFailures = 0;
      notePassivationLocked(e, result);
    } else {
      if (e.startFailures < kMaxStartRetryDoublings) ++e.startFailures;
      failures = startFailureLog_.occur(now);
      if (failures > 0) {
        log_.warn("entity start failed", {{"type", e.key->type},
                                          {"id", e.key->id},
                                          {"error", result.status().toString()},
                                          {"failures", failures}});
      }
      // Tried again while the shard may run here; messages go to the app meanwhile.
      if (e.needsStart && canRunLocked(e.shard)) scheduleStartRetryLocked(e);
    }
    afterTurnLocked(e, actions);
  }
  run(actions);
}

void EntityRegistry::scheduleStartRetryLocked(Entity& e) {
  const Duration delay = std::min<Duration>(
      kStartRetryDelay * (Duration::rep{1} << (e.startFailures - 1)), kMaxStartRetryDelay);
  e.startBackoff = true;
  scheduleLocked(
      delay,
      [this, key = *e.key] {
        Actions retry;
        {
          std::lock_guard inner(mu_);
          auto it = entities_.find(key);
          if (it == entities_.end()) return;  // stopped meanwhile
          Entity& r = it->second;
          r.startBackoff = false;
          // Abandoned when the shard no longer runs here (handing off, fenced, draining): the
          // entity stops with it, and a listener starts it again if the shard comes back.
          if (!r.busy && startOwedLocked(r)) startNextLocked(r, retry);
        }
        run(retry);
      },
      nullptr);
}

void EntityRegistry::notePassivationLocked(Entity& e, const StatusOr<http::Response>& result) {
  // A singleton runs while its shard is here: the spec, not the app, says whether it exists.
  if (!asksPassivation(result) || e.key->type == kSingletonEntityType) return;
  e.pinned = false;
  e.needsStart = false;
  e.afterTurn = kPassivateAfterTurn;
}

// The rule that keeps every tell answered 202: a remembered entity needs a record
// (Entity::needsRecord) only while each message in its mailbox may still be refused — an ask, or
// a tell whose 202 is held for the record. A new entity has nothing queued before it needs one,
// and the passivation the app asks for (the only other way to need one) waits until the mailbox
// is empty (afterTurnLocked); every tell queued after that is held. So a record that fails (or
// whose recorder does not answer in time) refuses only what the sender will retry, and no tell
// already acknowledged ever waits for a record.
void EntityRegistry::beginPassivationLocked(Entity& e, Actions& out) {
  e.afterTurn = kContinue;
  if (recorder_ == nullptr || !recorder_->remembered(e.key->type)) {
    beginStopLocked(e, mustStopLocked(e.shard), out);
    return;
  }
  // From now on the entity counts as not recorded: a tell that arrives while it is forgotten
  // and stopped restarts it, and is answered only once it is recorded again.
  e.needsRecord = true;
  beginRecorderCallLocked(e, RecorderCallKind::kForget, out);
}

void EntityRegistry::onForgotten(const EntityKey& key, std::uint64_t call, Status result) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const std::optional<RecorderCall> current = finishRecorderCallLocked(key, call);
    Entity* answered = current ? recorderAnsweredLocked(key) : nullptr;
    if (answered == nullptr) return;  // answered past its deadline
    Entity& e = *answered;
    if (result.ok()) {
      beginStopLocked(e, mustStopLocked(e.shard), actions);
    } else {
      // Still recorded (as far as this pod knows: a forget past its deadline may land later,
      // and the entity then runs here unrecorded until it stops): it stays active, and pinned
      // unless unpinned meanwhile.
      log_.warn("remembered entity not forgotten; it stays active",
                {{"type", key.type}, {"id", key.id}, {"error", result.toString()}});
      e.needsRecord = false;
      if (!current->unpinned) e.pinned = true;
      releaseHeldAcksLocked(e, actions);
      afterTurnLocked(e, actions);
    }
  }
  run(actions);
}

void EntityRegistry::beginRecordLocked(Entity& e, Actions& out) {
  beginRecorderCallLocked(e, RecorderCallKind::kRecord, out);
}

void EntityRegistry::onRecorded(const EntityKey& key, std::uint64_t call, Status result) {
  Actions actions;
  bool failed = false;
  bool kept = false;
  {
    std::lock_guard lock(mu_);
    const std::optional<RecorderCall> current = finishRecorderCallLocked(key, call);
    Entity* answered = current ? recorderAnsweredLocked(key) : nullptr;
    if (answered == nullptr) return;  // answered past its deadline
    Entity& e = *answered;
    // Kept active meanwhile (keepActive): recorded by whoever called it.
    if (result.ok() || e.pinned) {
      e.needsRecord = false;
      // A remembered entity runs until the app asks to passivate it, unless unpinned during
      // the record (an unpin(stop) then stops it here).
      if (!current->unpinned) e.pinned = true;
      releaseHeldAcksLocked(e, actions);
      afterTurnLocked(e, actions);
    } else {
      // Its waiting messages are refused (kNotOwned: retried by their senders; by the rule
      // above, none was answered 202). A bound of the records (ResourceExhausted) is answered
      // as such: a retry would meet it again.
      failed = true;
      const Refusal refusal = result.code() == StatusCode::kResourceExhausted
                                  ? Refusal::kRememberedFull
                                  : Refusal::kNotOwned;
      while (!e.mailbox.empty()) refuseQueuedLocked(e.mailbox.take(), actions, refusal);
      kept = e.atApp;
      if (kept) {
        // The app may still hold it (its stop after the passivation failed): it stays, still
        // needing a record before its next turn, until a stop succeeds (the idle sweep, a
        // handoff). Removed now, its shard could be released while the app holds it.
        afterTurnLocked(e, actions);
      } else {
        removeEntityLocked(key, actions);  // nothing reached the app
      }
    }
  }
  if (failed) {
    log_.warn("remembered entity not recorded; its messages are refused",
              {{"type", key.type}, {"id", key.id}, {"error", result.toString()}, {"kept", kept}});
  }
  run(actions);
}

void EntityRegistry::releaseHeldAcksLocked(Entity& e, Actions& out) {
  // Answered 202 only while a new tell would be (deliver()'s rule): answered once the lease has
  // run out (or the shard is handing off), it could be dropped before it reaches the app.
  // Otherwise refused: its sender retries it, at the next owner.
  if (!takingLocked(e.shard)) {
    Mailbox kept;
    while (!e.mailbox.empty()) {
      Pending p = e.mailbox.take();
      if (p.heldAck) {
        refuseQueuedLocked(std::move(p), out);
      } else {
        kept.push(std::move(p));
      }
    }
    e.mailbox = std::move(kept);
    return;
  }
  e.mailbox.forEach([&out](Pending& p) {
    if (!p.heldAck) return;
    out.push_back([ack = std::move(p.heldAck)]() mutable {
      http::Response accepted;
      accepted.status = 202;
      ack(DeliveryOutcome{std::nullopt, std::move(accepted)});
    });
    p.heldAck = nullptr;
  });
}

void EntityRegistry::beginRecorderCallLocked(Entity& e, RecorderCallKind kind, Actions& out) {
  markBusyLocked(e);
  const std::uint64_t id = ++recorderCallSeq_;
  // The call and its answer get a key of their own, and the answer finds the entity by key: an
  // answer given at once may remove it before the recorder returns, and a late one (past its
  // deadline) may come after it is gone.
  const EntityKey key = *e.key;
  auto answer = [this, key, id, kind](Status s) {
    if (kind == RecorderCallKind::kForget) {
      onForgotten(key, id, std::move(s));
    } else {
      onRecorded(key, id, std::move(s));
    }
  };
  RecorderCall& call = recorderCalls_[key];
  call = RecorderCall{id};
  // Past its deadline the call counts as failed (for a record, see the rule above), so that a
  // recorder that never answers does not keep the entity busy and its shard's handoff waiting.
  scheduleLocked(
      options_.recorderTimeout,
      [answer] { answer(deadlineExceeded("the entity recorder did not answer in time")); },
      &call.deadline);
  out.push_back([this, key, shard = e.shard, epoch = shards_.at(e.shard).epoch, kind, answer] {
    if (kind == RecorderCallKind::kForget) {
      recorder_->forgotten(key, shard, epoch, answer);
    } else {
      recorder_->started(key, shard, epoch, answer);
    }
  });
}

EntityRegistry::Entity* EntityRegistry::recorderAnsweredLocked(const EntityKey& key) {
  auto it = entities_.find(key);
  if (it == entities_.end()) return nullptr;
  Entity& e = it->second;
  e.busy = false;
  e.lastActive = scheduler_.clock().now();
  return &e;
}

std::optional<EntityRegistry::RecorderCall> EntityRegistry::finishRecorderCallLocked(
    const EntityKey& key, std::uint64_t id) {
  auto it = recorderCalls_.find(key);
  if (it == recorderCalls_.end() || it->second.id != id) return std::nullopt;
  const RecorderCall call = it->second;
  recorderCalls_.erase(it);
  if (timers_.erase(call.deadline) > 0) scheduler_.cancel(call.deadline);
  return call;
}

void EntityRegistry::notifyShardsTakenLocked(std::vector<std::pair<ShardId, Epoch>> taken,
                                             Actions& out) {
  if (takenListeners_.empty()) return;
  std::map<Epoch, std::vector<ShardId>> byEpoch;
  for (const auto& [shard, epoch] : taken) byEpoch[epoch].push_back(shard);
  for (auto& [epoch, shards] : byEpoch) {
    std::sort(shards.begin(), shards.end());
    for (const auto& listener : takenListeners_) {
      out.push_back([listener, shards = shards, epoch = epoch] { listener(shards, epoch); });
    }
  }
}

void EntityRegistry::resumeOwedStartsLocked(Actions& out) {
  for (auto& [key, e] : entities_) {
    if (!e.busy && startOwedLocked(e)) startNextLocked(e, out);
  }
}

void EntityRegistry::notifyAllOwnedLocked(Actions& out) {
  if (!acceptingLocked() || draining_) return;
  resumeOwedStartsLocked(out);
  std::vector<std::pair<ShardId, Epoch>> owned;
  for (const auto& [s, shard] : shards_) {
    if (shard.state == ShardState::kOwned) owned.emplace_back(s, shard.epoch);
  }
  if (!owned.empty()) notifyShardsTakenLocked(std::move(owned), out);
}

}  // namespace kshard::sidecar
