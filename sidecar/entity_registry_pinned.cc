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

bool EntityRegistry::canRunLocked(ShardId shard) const {
  auto it = shards_.find(shard);
  return it != shards_.end() && it->second.state == ShardState::kOwned && acceptingLocked() &&
         !draining_;
}

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
      return true;
    }
    Entity& e = createEntityLocked(key, shard, shards_.at(shard));
    e.pinned = true;
    e.needsStart = true;
    startNextLocked(e, actions);
  }
  run(actions);
  return true;
}

void EntityRegistry::unpin(const EntityKey& key, bool stop) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    auto it = entities_.find(key);
    if (it == entities_.end() || !it->second.pinned) return;
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
  out.push_back([this, entity = &e, epoch, turn] {
    // The entity is busy: nothing removes it, and its node does not move.
    host_.start(*entity->key, entity->shard, epoch, turn,
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

void EntityRegistry::beginPassivationLocked(Entity& e, Actions& out) {
  e.afterTurn = kContinue;
  if (recorder_ == nullptr || !recorder_->remembered(e.key->type)) {
    beginStopLocked(e, mustStopLocked(e.shard), out);
    return;
  }
  // From now on the entity counts as not recorded: a tell that arrives while it is forgotten
  // and stopped restarts it, and is answered only once it is recorded again.
  e.needsRecord = true;
  markBusyLocked(e);
  const Epoch epoch = shards_.at(e.shard).epoch;
  out.push_back([this, entity = &e, epoch] {
    recorder_->forgotten(*entity->key, entity->shard, epoch,
                         [this, entity](Status s) { onForgotten(*entity, std::move(s)); });
  });
}

void EntityRegistry::onForgotten(Entity& e, Status result) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    e.busy = false;
    e.lastActive = scheduler_.clock().now();
    if (result.ok()) {
      beginStopLocked(e, mustStopLocked(e.shard), actions);
    } else {
      // Still recorded: it stays active (and pinned), as the record says.
      log_.warn("remembered entity not forgotten; it stays active",
                {{"type", e.key->type}, {"id", e.key->id}, {"error", result.toString()}});
      e.needsRecord = false;
      e.pinned = true;
      releaseHeldAcksLocked(e, actions);
      afterTurnLocked(e, actions);
    }
  }
  run(actions);
}

void EntityRegistry::beginRecordLocked(Entity& e, Actions& out) {
  markBusyLocked(e);
  const Epoch epoch = shards_.at(e.shard).epoch;
  out.push_back([this, entity = &e, epoch] {
    recorder_->started(*entity->key, entity->shard, epoch,
                       [this, entity](Status s) { onRecorded(*entity, std::move(s)); });
  });
}

void EntityRegistry::onRecorded(Entity& e, Status result) {
  Actions actions;
  std::optional<EntityKey> failed;
  {
    std::lock_guard lock(mu_);
    e.busy = false;
    e.lastActive = scheduler_.clock().now();
    // Kept active meanwhile (keepActive): recorded by whoever called it.
    if (result.ok() || e.pinned) {
      e.needsRecord = false;
      e.pinned = true;  // a remembered entity runs until the app asks to passivate it
      releaseHeldAcksLocked(e, actions);
      afterTurnLocked(e, actions);
    } else {
      // Nothing reached the app: its waiting messages are refused (kNotOwned: retried by their
      // senders; the held tells were not answered yet) and the entity is dropped. A bound of
      // the records (ResourceExhausted) is answered as such: a retry would meet it again.
      failed = *e.key;
      const Refusal refusal = result.code() == StatusCode::kResourceExhausted
                                  ? Refusal::kRememberedFull
                                  : Refusal::kNotOwned;
      while (!e.mailbox.empty()) refuseQueuedLocked(e.mailbox.take(), actions, refusal);
      removeEntityLocked(*failed, actions);
    }
  }
  if (failed) {
    log_.warn("remembered entity not recorded; its messages are refused",
              {{"type", failed->type}, {"id", failed->id}, {"error", result.toString()}});
  }
  run(actions);
}

void EntityRegistry::releaseHeldAcksLocked(Entity& e, Actions& out) {
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

void EntityRegistry::notifyShardsTakenLocked(std::vector<std::pair<ShardId, Epoch>> taken,
                                             Actions& out) {
  if (takenListeners_.empty()) return;
  std::map<Epoch, std::vector<ShardId>> byEpoch;
  for (const auto& [shard, epoch] : taken) byEpoch[epoch].push_back(shard);
  for (auto& [epoch, shards] : byEpoch) {
    std::sort(shards.begin(), shards.end());
    for (const auto& listener : takenListeners_) {
      out.push_back([listener, shards, epoch = epoch] { listener(shards, epoch); });
    }
  }
}

void EntityRegistry::notifyAllOwnedLocked(Actions& out) {
  if (!acceptingLocked() || draining_) return;
  std::vector<std::pair<ShardId, Epoch>> owned;
  for (const auto& [s, shard] : shards_) {
    if (shard.state == ShardState::kOwned) owned.emplace_back(s, shard.epoch);
  }
  if (!owned.empty()) notifyShardsTakenLocked(std::move(owned), out);
}

}  // namespace kshard::sidecar
