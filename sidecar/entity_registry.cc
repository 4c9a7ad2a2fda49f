#include "sidecar/entity_registry.h"

#include <algorithm>
#include <unordered_set>

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
    : host_(host), scheduler_(scheduler), options_(options), log_(std::move(logger)) {}

EntityRegistry::~EntityRegistry() {
  std::lock_guard lock(mu_);
  for (const auto& [id, unused] : timers_) scheduler_.cancel(id);
}

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

std::string overloadMessage(Refusal refusal) {
  if (refusal == Refusal::kTellBacklog) {
    return "too many tell messages wait for this pod's app; slow down and retry";
  }
  return "the entity's mailbox is full; slow down and retry";
}

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

std::vector<ShardId> EntityRegistry::assign(const std::vector<ShardId>& shards, Epoch epoch,
                                            bool fromMap) {
  std::vector<ShardId> refused;
  std::lock_guard lock(mu_);
  for (ShardId s : shards) {
    // A draining pod takes no shard: it is about to leave, and whatever it accepted now it
    // would have to hand off again at once.
    if (draining_) {
      refused.push_back(s);
      continue;
    }
    // Epoch fence: an unassign as of a newer epoch was processed, so this assign was sent
    // before it and arrives late. Taking the shard would make two owners.
    if (auto f = fences_.find(s);
        f != fences_.end() && (epoch < f->second || (fromMap && epoch == f->second))) {
      refused.push_back(s);
      continue;
    }
    auto [it, inserted] = shards_.try_emplace(s);
    Shard& shard = it->second;
    if (inserted || shard.state == ShardState::kHandingOff) {
      shard.state = ShardState::kOwned;
      shard.epoch = epoch;
    } else {
      shard.epoch = std::max(shard.epoch, epoch);
    }
  }
  if (!refused.empty()) {
    log_.warn("assign refused", {{"shards", static_cast<std::uint64_t>(refused.size())},
                                 {"epoch", epoch},
                                 {"draining", draining_}});
  }
  return refused;
}

void EntityRegistry::unassign(const std::vector<ShardId>& shards, Epoch epoch, Duration timeout,
                              HandoffCallback done) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    handOffLocked(shards, epoch, actions);
    waitForReleaseLocked(shards, timeout, std::move(done), actions);
  }
  run(actions);
}

void EntityRegistry::revokeIfOlder(ShardId shard, Epoch epoch) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    auto it = shards_.find(shard);
    if (it == shards_.end() || it->second.state != ShardState::kOwned ||
        it->second.epoch >= epoch) {
      return;
    }
    log_.warn("shard given away at a newer epoch, releasing",
              {{"shard", shard}, {"owned_epoch", it->second.epoch}, {"epoch", epoch}});
    handOffLocked({shard}, epoch, actions);
  }
  run(actions);
}

void EntityRegistry::drain(Duration timeout, std::function<void(bool)> done) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    std::vector<ShardId> all;
    all.reserve(shards_.size());
    for (const auto& [s, unused] : shards_) all.push_back(s);
    handOffLocked(all, std::nullopt, actions);
    waitForReleaseLocked(
        std::move(all), timeout,
        [done = std::move(done)](std::vector<ShardId> busy) { done(busy.empty()); }, actions);
  }
  run(actions);
}

void EntityRegistry::handOffLocked(const std::vector<ShardId>& shards, std::optional<Epoch> fence,
                                   Actions& out) {
  std::unordered_set<ShardId> starting;
  for (ShardId s : shards) {
    if (fence) {
      Epoch& f = fences_[s];
      f = std::max(f, *fence);
    }
    auto it = shards_.find(s);
    if (it == shards_.end()) continue;
    if (it->second.entities == 0) {
      shards_.erase(it);
      continue;
    }
    if (it->second.state == ShardState::kOwned) {
      it->second.state = ShardState::kHandingOff;
      starting.insert(s);
    }
  }
  if (!starting.empty()) {
    // A passivation waiting for its turn now goes with the handoff's stops, in its order.
    for (Entity* e = passivationStops_.head; e != nullptr;) {
      Entity* next = e->next;
      if (starting.count(e->shard)) {
        passivationStops_.remove(*e);
        handoffStops_.pushBack(*e);
      }
      e = next;
    }
    // Idle entities stop now; busy ones stop after their accepted messages (afterTurnLocked).
    for (auto& [key, e] : entities_) {
      if (starting.count(e.shard) && !e.busy && e.mailbox.empty()) beginStopLocked(e, true, out);
    }
  }
  completeHandoffsLocked(out);
}

void EntityRegistry::waitForReleaseLocked(std::vector<ShardId> shards, Duration timeout,
                                          HandoffCallback done, Actions& out) {
  const bool released = std::none_of(shards.begin(), shards.end(),
                                     [this](ShardId s) { return shards_.count(s) > 0; });
  // A shard retaken by assign while handing off is not released: it stays busy for this waiter.
  if (released) {
    out.push_back([done = std::move(done)] { done({}); });
    return;
  }
  auto handoff = std::make_shared<Handoff>();
  handoff->shards = std::move(shards);
  handoff->done = std::move(done);
  scheduleLocked(
      timeout, [this, handoff] { onHandoffDeadline(handoff); }, &handoff->deadline);
  handoffs_.push_back(std::move(handoff));
}

void EntityRegistry::completeHandoffsLocked(Actions& out) {
  for (auto it = handoffs_.begin(); it != handoffs_.end();) {
    const auto& h = *it;
    const bool released = std::none_of(h->shards.begin(), h->shards.end(),
                                       [this](ShardId s) { return shards_.count(s) > 0; });
    if (!released) {
      ++it;
      continue;
    }
    if (timers_.erase(h->deadline)) scheduler_.cancel(h->deadline);
    out.push_back([done = std::move(h->done)] { done({}); });
    it = handoffs_.erase(it);
  }
}

void EntityRegistry::onHandoffDeadline(const std::shared_ptr<Handoff>& handoff) {
  std::vector<ShardId> busy;
  {
    std::lock_guard lock(mu_);
    auto it = std::find(handoffs_.begin(), handoffs_.end(), handoff);
    if (it == handoffs_.end()) return;
    handoffs_.erase(it);
    for (ShardId s : handoff->shards) {
      if (shards_.count(s)) busy.push_back(s);
    }
  }
  log_.warn("handoff deadline passed", {{"busy_shards", static_cast<std::uint64_t>(busy.size())}});
  handoff->done(std::move(busy));
}

void EntityRegistry::deliver(Message message, DeliveryCallback done) {
  Actions actions;
  std::optional<Refusal> refusal;
  const bool tell = message.mode == DeliveryMode::kTell;
  // The common case: the entity is idle, and the message goes straight to the app, with no
  // mailbox and no deferred action.
  Entity* direct = nullptr;
  Epoch directEpoch = 0;
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
    } else {
      if (eit == entities_.end()) {
        eit = entities_.try_emplace(message.key).first;
        eit->second.key = &eit->first;
        eit->second.shard = message.shard;
        eit->second.lastActive = scheduler_.clock().now();
        std::size_t& typeCount = typeCounts_.try_emplace(message.key.type, 0).first->second;
        ++typeCount;
        eit->second.typeCount = &typeCount;
        ++sit->second.entities;
      }
      Entity& e = eit->second;
      if (e.mailbox.size() >= options_.maxMailbox) {
        refusal = Refusal::kOverloaded;
      } else {
        if (tell) {
          ++pendingTells_;
          pendingTellBytes_ += message.body.size();
        }
        if (!e.busy && e.mailbox.empty()) {
          markBusyLocked(e);
          if (tell) e.tellBytes = static_cast<std::uint32_t>(message.body.size());
          direct = &e;
          directEpoch = sit->second.epoch;
          message.turn = nextTurnLocked(e);
        } else {
          e.mailbox.push(Pending{std::move(message), tell ? nullptr : std::move(done)});
          if (!e.busy) startNextLocked(e, actions);
        }
      }
    }
  }
  if (refusal) {
    done(DeliveryOutcome{refusal, http::Response{}});
  } else if (tell) {
    done(DeliveryOutcome{std::nullopt, acceptedResponse()});
  }
  if (direct != nullptr) {
    startTurn(*direct, directEpoch, std::move(message), tell ? nullptr : std::move(done));
  }
  run(actions);
}

void EntityRegistry::startNextLocked(Entity& e, Actions& out) {
  // A queued message reaches the app only while the lease runs: after that, another pod may own
  // the shard, so what is left in the mailbox is refused (the sender tries the next owner).
  while (!e.mailbox.empty()) {
    if (deliveringLocked()) {
      startTurnLocked(e, e.mailbox.take(), out);
      return;
    }
    refuseQueuedLocked(e.mailbox.take(), out);
  }
  afterTurnLocked(e, out);
}

void EntityRegistry::refuseQueuedLocked(Pending p, Actions& out) {
  if (p.done) {
    out.push_back([done = std::move(p.done)]() mutable {
      done(DeliveryOutcome{Refusal::kNotOwned, http::Response{}});
    });
    return;
  }
  // A tell was answered 202 when it was queued; it is lost like the tells of a crashed pod.
  --pendingTells_;
  pendingTellBytes_ -= p.message.body.size();
  ++droppedTells_;
  if (const std::uint64_t n = fenceDropLog_.occur(scheduler_.clock().now())) {
    log_.warn("tell dropped: the ownership lease ran out before it reached the app",
              {{"type", p.message.key.type}, {"id", p.message.key.id}, {"failures", n},
               {"dropped_total", droppedTells_}});
  }
}

bool EntityRegistry::acceptingLocked() const {
  return !lease_.enabled() || (!fenced_ && lease_.acceptsAt(scheduler_.clock().now()));
}

bool EntityRegistry::deliveringLocked() const {
  return !lease_.enabled() || lease_.deliversAt(scheduler_.clock().now());
}

void EntityRegistry::markBusyLocked(Entity& e) {
  e.busy = true;
  idle_.remove(e);
}

std::uint64_t EntityRegistry::nextTurnLocked(Entity& e) { return e.lastTurn = ++turns_; }

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

bool EntityRegistry::handingOffLocked(ShardId shard) const {
  auto it = shards_.find(shard);
  return it == shards_.end() || it->second.state == ShardState::kHandingOff;
}

void EntityRegistry::afterTurnLocked(Entity& e, Actions& out) {
  if (!e.mailbox.empty()) {
    startNextLocked(e, out);
  } else if (mustStopLocked(e.shard)) {
    beginStopLocked(e, true, out);
  } else {
    // Idle: at the back of the idle list. The sweep armed for the front fires no later than
    // this entity is due, so it is armed only when none is.
    idle_.pushBack(e);
    if (options_.idleTimeout > Duration::zero())
      armSweepLocked(e.lastActive + options_.idleTimeout);
  }
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
  if (!result.ok()) {
    // It stays active: passivation is tried again after another idle timeout.
    e.lastActive = scheduler_.clock().now();
    if (e.stopFailures < kMaxStopRetryDoublings) ++e.stopFailures;
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
    // Messages that arrived while the entity stopped (its shard is still owned) start it again,
    // if the lease still lets them reach the app.
    while (!e.mailbox.empty() && !deliveringLocked()) {
      refuseQueuedLocked(e.mailbox.take(), out);
    }
    if (!e.mailbox.empty()) {
      startNextLocked(e, out);
    } else {
      removeEntityLocked(key, out);
    }
  }
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
  if (sit == shards_.end()) return;
  --sit->second.entities;
  if (sit->second.state == ShardState::kHandingOff && sit->second.entities == 0) {
    shards_.erase(sit);
    completeHandoffsLocked(out);
  }
}

void EntityRegistry::undrain() {
  std::lock_guard lock(mu_);
  if (!draining_) return;
  draining_ = false;
  log_.info("drain undone: taking entities and shards again");
}

void EntityRegistry::setLeaseDuration(Duration duration) {
  std::lock_guard lock(mu_);
  if (duration == lease_.duration()) return;
  lease_.setDuration(duration);
  publishDeadlineLocked();
  armFenceLocked();
}

void EntityRegistry::publishDeadlineLocked() {
  const Duration::rep until = !lease_.enabled()   ? Duration::max().count()
                              : lease_.confirmed() ? lease_.until().time_since_epoch().count()
                                                   : 0;
  appDeadline_.store(until, std::memory_order_release);
}

void EntityRegistry::renewLease(SteadyTime sentAt) {
  std::lock_guard lock(mu_);
  if (!lease_.renew(sentAt)) return;
  publishDeadlineLocked();
  if (fenced_ && lease_.acceptsAt(scheduler_.clock().now())) {
    fenced_ = false;
    log_.info("ownership confirmed again; delivering messages");
  }
  armFenceLocked();
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
    for (auto& [key, e] : entities_) {
      if (!e.busy && e.mailbox.empty()) beginStopLocked(e, true, actions);
    }
  }
  run(actions);
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

bool EntityRegistry::owns(ShardId shard) const {
  std::lock_guard lock(mu_);
  auto it = shards_.find(shard);
  return it != shards_.end() && it->second.state == ShardState::kOwned;
}

std::optional<Epoch> EntityRegistry::ownedEpoch(ShardId shard) const {
  std::lock_guard lock(mu_);
  auto it = shards_.find(shard);
  if (it == shards_.end() || it->second.state != ShardState::kOwned) return std::nullopt;
  return it->second.epoch;
}

std::vector<ShardId> EntityRegistry::ownedShards() const {
  std::lock_guard lock(mu_);
  std::vector<ShardId> out;
  for (const auto& [s, shard] : shards_) {
    if (shard.state == ShardState::kOwned) out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
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

std::vector<std::pair<std::string, std::size_t>> EntityRegistry::activeEntitiesByType() const {
  std::vector<std::pair<std::string, std::size_t>> out;
  {
    std::lock_guard lock(mu_);
    out.assign(typeCounts_.begin(), typeCounts_.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool EntityRegistry::draining() const {
  std::lock_guard lock(mu_);
  return draining_;
}

}  // namespace kshard::sidecar
