#include "tools/simulate_ledger.h"

#include <algorithm>

namespace kshard::tools {

OwnershipLedger::OwnershipLedger(std::int32_t shardCount)
    : owner_(static_cast<std::size_t>(shardCount), kNoSimPod),
      everOwned_(static_cast<std::size_t>(shardCount), false),
      movesOf_(static_cast<std::size_t>(shardCount), 0),
      posInPod_(static_cast<std::size_t>(shardCount), -1),
      unassigned_(shardCount) {}

void OwnershipLedger::grow(SimPod pod) {
  const auto needed = static_cast<std::size_t>(pod) + 1;
  if (shardsOf_.size() < needed) {
    shardsOf_.resize(needed);
    serving_.resize(needed, false);
  }
}

std::span<const sharding::ShardId> OwnershipLedger::shardsOf(SimPod pod) const {
  if (pod < 0 || static_cast<std::size_t>(pod) >= shardsOf_.size()) return {};
  return shardsOf_[static_cast<std::size_t>(pod)];
}

std::int32_t OwnershipLedger::countOf(SimPod pod) const {
  return static_cast<std::int32_t>(shardsOf(pod).size());
}

void OwnershipLedger::histogramAdd(std::int32_t count, int delta) {
  auto it = servingCounts_.try_emplace(count, 0).first;
  it->second += delta;
  if (it->second == 0) servingCounts_.erase(it);
}

void OwnershipLedger::addToPod(sharding::ShardId shard, SimPod pod) {
  grow(pod);
  auto& list = shardsOf_[static_cast<std::size_t>(pod)];
  if (serving_[static_cast<std::size_t>(pod)]) {
    histogramAdd(static_cast<std::int32_t>(list.size()), -1);
    histogramAdd(static_cast<std::int32_t>(list.size()) + 1, 1);
  }
  posInPod_[index(shard)] = static_cast<std::int32_t>(list.size());
  list.push_back(shard);
}

void OwnershipLedger::removeFromPod(sharding::ShardId shard, SimPod pod) {
  auto& list = shardsOf_[static_cast<std::size_t>(pod)];
  if (serving_[static_cast<std::size_t>(pod)]) {
    histogramAdd(static_cast<std::int32_t>(list.size()), -1);
    histogramAdd(static_cast<std::int32_t>(list.size()) - 1, 1);
  }
  // Swap-remove: O(1), order within a pod's list carries no meaning.
  const auto pos = static_cast<std::size_t>(posInPod_[index(shard)]);
  list[pos] = list.back();
  posInPod_[index(list[pos])] = static_cast<std::int32_t>(pos);
  list.pop_back();
  posInPod_[index(shard)] = -1;
}

void OwnershipLedger::assign(sharding::ShardId shard, SimPod pod) {
  const SimPod from = owner_[index(shard)];
  if (from == pod) return;
  if (from == kNoSimPod) {
    --unassigned_;
  } else {
    removeFromPod(shard, from);
  }
  if (everOwned_[index(shard)]) {
    ++moves_;
    ++movesOf_[index(shard)];
  } else {
    ++placements_;
    everOwned_[index(shard)] = true;
  }
  owner_[index(shard)] = pod;
  addToPod(shard, pod);
  changed_ = true;
}

void OwnershipLedger::release(sharding::ShardId shard) {
  const SimPod from = owner_[index(shard)];
  if (from == kNoSimPod) return;
  removeFromPod(shard, from);
  owner_[index(shard)] = kNoSimPod;
  ++unassigned_;
}

void OwnershipLedger::setServing(SimPod pod, bool serving) {
  grow(pod);
  const auto p = static_cast<std::size_t>(pod);
  if (serving_[p] == serving) return;
  serving_[p] = serving;
  histogramAdd(static_cast<std::int32_t>(shardsOf_[p].size()), serving ? 1 : -1);
}

void OwnershipLedger::commit(SimTime now) {
  if (changed_) {
    // Changes at one instant are one round, however the strategy split its work.
    if (rounds_ == 0 || now != lastChange_) ++rounds_;
    lastChange_ = now;
    changed_ = false;
  }
  sample();
}

void OwnershipLedger::sample() { worstImbalance_ = std::max(worstImbalance_, imbalance()); }

std::int32_t OwnershipLedger::imbalance() const {
  if (servingCounts_.empty()) return 0;
  return servingCounts_.rbegin()->first - servingCounts_.begin()->first;
}

void OwnershipLedger::resetCounters() {
  std::fill(movesOf_.begin(), movesOf_.end(), 0);
  moves_ = 0;
  placements_ = 0;
  rounds_ = 0;
  changed_ = false;
  lastChange_ = SimTime{0};
  worstImbalance_ = imbalance();
}

std::int32_t OwnershipLedger::maxMovesOfOneShard() const {
  return movesOf_.empty() ? 0 : *std::max_element(movesOf_.begin(), movesOf_.end());
}

}  // namespace kshard::tools
