// EntityRegistry: messages — deliver, the mailboxes and the turns at the app — with the
// registry's timers, its entity counts and the shards' load. Ownership and handoffs are in
// entity_registry_handoff.cc, passivation and stops in entity_registry_stops.cc, the
// ownership lease in entity_registry_lease.cc.
#include "sidecar/entity_registry.h"

#include <algorithm>
#include <cmath>

#include "sidecar/entity_recorder.h"

namespace kshard::sidecar {
namespace {

http::Response acceptedResponse() {
  http::Response r;
  r.status = 202;
  return r;
}

}  // namespace

std::size_t EntityKeyHash::operator()(const EntityKey& k) const {
  const std::size_t a = std::hash<std::string>{}(k.type);
  const std::size_t b = std::hash<std::string>{}(k.id);
  return a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
}

EntityRegistry::EntityRegistry(EntityHost& host, Scheduler& scheduler,
                               EntityRegistryOptions options, Logger logger)
    : host_(host),
      scheduler_(scheduler),
      options_(options),
      log_(std::move(logger)),
      loadSampledAt_(scheduler.clock().now()) {}

EntityRegistry::~EntityRegistry() {
  std::lock_guard lock(mu_);
  for (const auto& [id, unused] : timers_) scheduler_.cancel(id);
}

std::string overloadMessage(Refusal refusal) {
  if (refusal == Refusal::kTellBacklog) {
    return "too many tell messages wait for this pod's app; slow down and retry";
  }
  if (refusal == Refusal::kRememberedFull) {
    return "the entity's shard, or its ShardMap, remembers as many entities as it may; the app "
           "forgets some by answering Kshard-Passivate: true";
  }
  if (refusal == Refusal::kEntityLimit) {
    return "too many new entities wait for a place among this pod's active entities "
           "(maxActiveEntitiesPerPod); slow down and retry";
  }
  return "the entity's mailbox is full; slow down and retry";
}

std::string_view overloadCode(Refusal refusal) {
  return refusal == Refusal::kRememberedFull ? protocol::errors::kRememberedEntitiesFull
                                             : protocol::errors::kEntityOverloaded;
}

void EntityRegistry::run(Actions& actions) {
  for (auto& a : actions) a();
  actions.clear();
}

void EntityRegistry::scheduleLocked(Duration delay, std::function<void()> task,
                                    Scheduler::TaskId* slot) {
  // The id is only known after runAfter returns, and the task may not run before the lock is
  // released, so the task can find and erase its own entry.
  auto id = std::make_shared<Scheduler::TaskId>(0);
  *id = scheduler_.runAfter(delay, [this, id, task = std::move(task)] {
    {
      std::lock_guard lock(mu_);
      if (timers_.erase(*id) == 0) return;  // cancelled while due
    }
    task();
  });
  timers_.emplace(*id, true);
  if (slot) *slot = *id;
}

void EntityRegistry::deliver(Message message, DeliveryCallback done) {
  Actions actions;
  std::optional<Refusal> refusal;
  const bool tell = message.mode == DeliveryMode::kTell;
  // The common case: the entity is idle, and the message goes straight to the app, with no
  // mailbox and no deferred action.
  Entity* direct = nullptr;
  Epoch directEpoch = 0;
  // A tell for an entity whose record is pending is answered once it is recorded.
  bool held = false;
  bool waits = false;  // the entity waits for a place under the limit: `done` was taken
  {
    std::lock_guard lock(mu_);
    auto sit = shards_.find(message.shard);
    auto eit = entities_.find(message.key);
    if (sit == shards_.end() || sit->second.state != ShardState::kOwned || !acceptingLocked()) {
      refusal = Refusal::kNotOwned;
    } else if (eit == entities_.end() && draining_) {
      refusal = Refusal::kDraining;
    } else if (tell && pendingTells_ > 0 &&
               (pendingTells_ >= options_.maxPendingTells ||
                pendingTellBytes_ + message.body.size() > options_.maxPendingTellBytes)) {
      refusal = Refusal::kTellBacklog;
    } else if (eit == entities_.end() && mustWaitLocked(message.key)) {
      refusal = waitForPlaceLocked(message, done, actions);
      waits = !refusal;
    } else {
      Entity& e = eit != entities_.end()
                      ? eit->second
                      : createEntityLocked(message.key, message.shard, sit->second);
      // A new entity of a remembered type is recorded before its first turn; a singleton that
      // a message reaches before its keeper started it is started first.
      if (eit == entities_.end() && recorder_ != nullptr && recorder_->remembered(e.key->type))
        e.needsRecord = true;
      if (eit == entities_.end() && e.key->type == kSingletonEntityType) e.needsStart = true;
      if (e.mailbox.size() >= options_.maxMailbox) {
        refusal = Refusal::kOverloaded;
      } else {
        ++sit->second.messages;
        if (tell) {
          ++pendingTells_;
          pendingTellBytes_ += message.body.size();
        }
        if (!e.busy && e.mailbox.empty() && !e.needsRecord && !e.needsStart) {
          markBusyLocked(e);
          if (tell) e.tellBytes = static_cast<std::uint32_t>(message.body.size());
          direct = &e;
          directEpoch = sit->second.epoch;
          message.turn = nextTurnLocked(e);
        } else {
          held = tell && e.needsRecord;
          e.mailbox.push(Pending{std::move(message), tell ? nullptr : std::move(done),
                                 held ? std::move(done) : nullptr});
          if (!e.busy) startNextLocked(e, actions);
        }
      }
    }
  }
  if (refusal) {
    done(DeliveryOutcome{refusal, http::Response{}});
  } else if (tell && !held && !waits) {
    done(DeliveryOutcome{std::nullopt, acceptedResponse()});
  }
  if (direct != nullptr) {
    startTurn(*direct, directEpoch, std::move(message), tell ? nullptr : std::move(done));
  }
  run(actions);
}

void EntityRegistry::startNextLocked(Entity& e, Actions& out) {
  // A kept-active entity's start turn comes before its messages; a remembered entity's record
  // before its first turn.
  if (startOwedLocked(e)) {
    beginStartLocked(e, out);
    return;
  }
  // A queued message reaches the app only while the lease runs: after that, another pod may own
  // the shard, so what is left in the mailbox is refused (the sender tries the next owner).
  while (!e.mailbox.empty()) {
    if (deliveringLocked() && e.needsRecord) {
      beginRecordLocked(e, out);
      return;
    }
    if (deliveringLocked()) {
      startTurnLocked(e, e.mailbox.take(), out);
      return;
    }
    refuseQueuedLocked(e.mailbox.take(), out);
  }
  afterTurnLocked(e, out);
}

void EntityRegistry::markBusyLocked(Entity& e) {
  e.busy = true;
  e.lastActive = scheduler_.clock().now();  // the turn's start, for the shard's busy time
  idle_.remove(e);
}

std::uint64_t EntityRegistry::nextTurnLocked(Entity& e) {
  e.atApp = true;
  return e.lastTurn = ++turns_;
}

void EntityRegistry::startTurnLocked(Entity& e, Pending next, Actions& out) {
  markBusyLocked(e);
  if (!next.done) e.tellBytes = static_cast<std::uint32_t>(next.message.body.size());
  const Epoch epoch = shards_.at(e.shard).epoch;
  next.message.turn = nextTurnLocked(e);
  out.push_back([this, entity = &e, epoch, next = std::move(next)]() mutable {
    startTurn(*entity, epoch, std::move(next.message), std::move(next.done));
  });
}

void EntityRegistry::startTurn(Entity& e, Epoch epoch, Message message, DeliveryCallback done) {
  // The entity stays in entities_ while it is busy (nothing removes a busy one), and the map's
  // elements do not move, so the turn's end finds it by address rather than by a second lookup.
  host_.deliver(std::move(message), epoch,
                [this, entity = &e, done = std::move(done)](StatusOr<http::Response>&& r) mutable {
                  onDelivered(*entity, std::move(done), std::move(r));
                });
}

void EntityRegistry::onDelivered(Entity& e, DeliveryCallback done,
                                 StatusOr<http::Response> result) {
  Actions actions;
  // A failed tell is logged after the lock is released, when the entity may be gone: its name
  // is copied while it is certainly there.
  std::optional<EntityKey> failedTell;
  std::uint64_t failedTells = 0;  // the failures the log line stands for (LogThrottle)
  {
    std::lock_guard lock(mu_);
    const SteadyTime now = scheduler_.clock().now();
    if (!done) {
      --pendingTells_;
      pendingTellBytes_ -= e.tellBytes;
      e.tellBytes = 0;
      if (!result.ok() && (failedTells = tellFailureLog_.occur(now)) > 0) failedTell = *e.key;
    }
    if (result.ok()) e.stopFailures = 0;  // the app answers
    notePassivationLocked(e, result);
    if (auto sit = shards_.find(e.shard); sit != shards_.end())
      sit->second.busy += now - e.lastActive;
    e.busy = false;
    e.lastActive = now;
    afterTurnLocked(e, actions);
  }
  if (done) {
    done(DeliveryOutcome{std::nullopt, std::move(result)});
  } else if (failedTell) {
    log_.warn("tell delivery failed", {{"type", failedTell->type},
                                       {"id", failedTell->id},
                                       {"error", result.status().toString()},
                                       {"failures", failedTells}});
  }
  run(actions);
}

void EntityRegistry::afterTurnLocked(Entity& e, Actions& out) {
  // The passivation the app asked for waits until no message does (a message that waits may be
  // a tell answered 202: it reaches the app before the entity is forgotten, see
  // beginPassivationLocked).
  if (e.afterTurn == kPassivateAfterTurn && e.mailbox.empty()) {
    beginPassivationLocked(e, out);
  } else if (e.afterTurn == kStopAfterTurn) {
    e.afterTurn = kContinue;
    beginStopLocked(e, mustStopLocked(e.shard), out);
  } else if (!e.mailbox.empty() || startOwedLocked(e)) {
    startNextLocked(e, out);
  } else if (mustStopLocked(e.shard)) {
    beginStopLocked(e, true, out);
  } else if (!e.pinned) {
    // Idle: at the back of the idle list. The sweep armed for the front fires no later than
    // this entity is due, so it is armed only when none is. A pinned entity is never in it.
    idle_.pushBack(e);
    if (options_.idleTimeout > Duration::zero())
      armSweepLocked(e.lastActive + options_.idleTimeout);
    // New entities wait for a place (or the limit was lowered): this one may have to make it.
    if (overLimitLocked()) enforceLimitLocked(out);
  }
}

std::size_t EntityRegistry::activeEntities() const {
  std::lock_guard lock(mu_);
  return entities_.size();
}

std::size_t EntityRegistry::activeEntities(const std::string& type) const {
  std::lock_guard lock(mu_);
  auto it = typeCounts_.find(type);
  return it == typeCounts_.end() ? 0 : it->second;
}

std::vector<std::pair<EntityKey, ShardId>> EntityRegistry::activeEntitiesOf(
    const std::string& type) const {
  std::vector<std::pair<EntityKey, ShardId>> out;
  std::lock_guard lock(mu_);
  if (!typeCounts_.contains(type)) return out;
  out.reserve(typeCounts_.at(type));
  for (const auto& [key, e] : entities_) {
    // One that is stopping would be started again by a message: it is no longer active.
    if (key.type == type && !e.stopping) out.emplace_back(key, e.shard);
  }
  return out;
}

std::vector<std::pair<std::string, std::size_t>> EntityRegistry::activeEntitiesByType() const {
  std::vector<std::pair<std::string, std::size_t>> out;
  {
    std::lock_guard lock(mu_);
    out.assign(typeCounts_.begin(), typeCounts_.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ShardLoad> EntityRegistry::sampleLoad(Duration halfLife) {
  std::lock_guard lock(mu_);
  const SteadyTime now = scheduler_.clock().now();
  const SteadyTime previous = loadSampledAt_;
  loadSampledAt_ = now;
  const double halfLifeSeconds = std::chrono::duration<double>(halfLife).count();
  std::vector<ShardLoad> out;
  for (auto& [s, shard] : shards_) {
    const double seconds =
        std::chrono::duration<double>(now - std::max(previous, shard.measuredSince)).count();
    if (seconds > 0) {
      // The weight the past keeps after `seconds`: exact for any spacing of the samples.
      const double keep = std::pow(0.5, seconds / halfLifeSeconds);
      const double messages = static_cast<double>(shard.messages) / seconds;
      const double busy = std::chrono::duration<double>(shard.busy).count() / seconds;
      shard.messageRate = keep * shard.messageRate + (1 - keep) * messages;
      shard.busyRate = keep * shard.busyRate + (1 - keep) * busy;
      shard.weight = keep * shard.weight + (1 - keep);
      // A shard that went quiet decays towards zero without reaching it: flush what no reader
      // would tell from nothing before it turns subnormal.
      for (double* rate : {&shard.messageRate, &shard.busyRate}) {
        if (*rate < kNegligibleRate) *rate = 0;
      }
      shard.messages = 0;
      shard.busy = Duration{0};
    }
    if (shard.state == ShardState::kOwned) {
      const double w = shard.weight > 0 ? shard.weight : 1;
      out.push_back({s, shard.messageRate / w, shard.busyRate / w, shard.entities});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ShardLoad& a, const ShardLoad& b) { return a.shard < b.shard; });
  return out;
}

}  // namespace kshard::sidecar
