// EntityRegistry: ownership of shards — assign, the epoch fences, unassign and revoke, the drain,
// and the handoffs that wait for a shard's entities to stop before it is released.
#include <algorithm>
#include <unordered_set>

#include "sidecar/entity_registry.h"

namespace kshard::sidecar {

std::vector<ShardId> EntityRegistry::assign(const std::vector<ShardId>& shards, Epoch epoch,
                                            bool fromMap) {
  std::vector<ShardId> refused;
  Actions actions;
  {
    std::lock_guard lock(mu_);
    std::vector<std::pair<ShardId, Epoch>> taken;  // newly owned, or taken back
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
      if (inserted) shard.measuredSince = scheduler_.clock().now();
      if (inserted || shard.state == ShardState::kHandingOff) {
        shard.state = ShardState::kOwned;
        shard.epoch = epoch;
        taken.emplace_back(s, epoch);
      } else {
        shard.epoch = std::max(shard.epoch, epoch);
      }
    }
    if (!refused.empty()) {
      log_.warn("assign refused", {{"shards", static_cast<std::uint64_t>(refused.size())},
                                   {"epoch", epoch},
                                   {"draining", draining_}});
    }
    if (!taken.empty()) notifyShardsTakenLocked(std::move(taken), actions);
  }
  run(actions);
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
  // Entities waiting for a place under the limit have not reached the app, and none of their
  // tells was acknowledged: all their messages are refused, for the next owner.
  if (!waitQueue_.empty()) {
    const std::unordered_set<ShardId> leaving(shards.begin(), shards.end());
    refuseWaitersLocked(&leaving, out);
  }
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

bool EntityRegistry::handingOffLocked(ShardId shard) const {
  auto it = shards_.find(shard);
  return it == shards_.end() || it->second.state == ShardState::kHandingOff;
}

void EntityRegistry::undrain() {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (!draining_) return;
    draining_ = false;
    log_.info("drain undone: taking entities and shards again");
    notifyAllOwnedLocked(actions);
  }
  run(actions);
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

bool EntityRegistry::draining() const {
  std::lock_guard lock(mu_);
  return draining_;
}

}  // namespace kshard::sidecar
