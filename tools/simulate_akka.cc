#include "tools/simulate_akka.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace kshard::tools {
namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

bool sameGroup(const std::array<std::int64_t, 4>& a, const std::array<std::int64_t, 4>& b) {
  return a[0] == b[0] && a[1] == b[1];
}

}  // namespace

AkkaManager::AkkaManager(Scheduler& scheduler, OwnershipLedger& ledger,
                         const SimulatedDeployment& deployment, AkkaParams params)
    : SimulatedManager(scheduler, ledger, deployment),
      params_(params),
      inProgress_(static_cast<std::size_t>(ledger.shardCount()), false),
      handoffId_(static_cast<std::size_t>(ledger.shardCount()), 0),
      allocationKey_(static_cast<std::size_t>(ledger.shardCount()), 0) {
  for (sharding::ShardId s = 1; s <= ledger.shardCount(); ++s) {
    if (ledger.owner(s) == kNoSimPod) unallocated_.insert(s);
  }
}

AkkaManager::Region& AkkaManager::region(SimPod pod) {
  if (regions_.size() <= static_cast<std::size_t>(pod)) {
    regions_.resize(static_cast<std::size_t>(pod) + 1);
  }
  return regions_[static_cast<std::size_t>(pod)];
}

const AkkaManager::Region& AkkaManager::region(SimPod pod) const {
  return regions_[static_cast<std::size_t>(pod)];
}

void AkkaManager::unrank(SimPod pod) {
  const Region& r = region(pod);
  ranked_.erase({r.rankKey, pod});
  active_.erase({r.rankKey, pod});
  available_.erase({r.availableKey, pod});
}

void AkkaManager::rank(SimPod pod) {
  Region& r = region(pod);
  if (!r.registered) return;
  const auto count = static_cast<std::int64_t>(r.shards.size());
  if (params_.classic) {
    r.rankKey = {0, 0, count, r.registration};
    // Most shards not being handed off first, then the earliest registered.
    r.availableKey = {0, 0, -(count - r.inProgress), r.registration};
    available_.insert({r.availableKey, pod});
  } else {
    r.rankKey = {r.leaving ? 1 : 0, -static_cast<std::int64_t>(r.revision), count, r.registration};
  }
  ranked_.insert({r.rankKey, pod});
  if (!r.leaving) active_.insert({r.rankKey, pod});
}

void AkkaManager::registerRegion(SimPod pod) {
  Region& r = region(pod);
  r.registered = true;
  r.registration = nextRegistration_++;
  r.revision = deployment_.pod(pod).revision;
  ++revisions_[r.revision];
  rank(pod);
}

void AkkaManager::allocate(sharding::ShardId shard) {
  if (active_.empty()) {
    unallocated_.insert(shard);
    return;
  }
  const SimPod pod = active_.begin()->second;
  unrank(pod);
  const std::int64_t key = params_.classic ? shard : nextAllocation_++;
  allocationKey_[static_cast<std::size_t>(shard - 1)] = key;
  region(pod).shards.insert({key, shard});
  ledger_.assign(shard, pod);
  rank(pod);
}

void AkkaManager::allocatePending() {
  const std::vector<sharding::ShardId> pending(unallocated_.begin(), unallocated_.end());
  unallocated_.clear();
  for (sharding::ShardId s : pending) allocate(s);
}

void AkkaManager::setInProgress(sharding::ShardId shard, bool inProgress) {
  const auto i = static_cast<std::size_t>(shard - 1);
  if (inProgress_[i] == inProgress) return;
  const SimPod pod = ledger_.owner(shard);
  unrank(pod);
  inProgress_[i] = inProgress;
  const int delta = inProgress ? 1 : -1;
  region(pod).inProgress += delta;
  totalInProgress_ += delta;
  rank(pod);
}

void AkkaManager::take(sharding::ShardId shard) {
  setInProgress(shard, false);
  const SimPod pod = ledger_.owner(shard);
  unrank(pod);
  region(pod).shards.erase({allocationKey_[static_cast<std::size_t>(shard - 1)], shard});
  ledger_.release(shard);
  rank(pod);
}

void AkkaManager::startWith(const std::vector<SimPod>& pods) {
  for (SimPod p : pods) registerRegion(p);
  // Every shard requested once, in id order: each goes to the most suitable region.
  allocatePending();
  ledger_.commit(now());
  confirmed_ = true;
  scheduler_.runAfter(params_.rebalanceInterval, [this] { tick(); });
}

void AkkaManager::podReady(SimPod pod) {
  registerRegion(pod);
  confirmed_ = false;
  if (!unallocated_.empty()) {
    allocatePending();
    ledger_.commit(now());
  }
}

void AkkaManager::podTerminating(SimPod pod) {
  Region& r = region(pod);
  if (!r.registered) return;
  // Graceful shutdown: no more allocations to it, and a handoff of all its shards begins.
  unrank(pod);
  r.leaving = true;
  rank(pod);
  std::vector<sharding::ShardId> shards;
  for (const auto& [key, shard] : r.shards) shards.push_back(shard);
  for (sharding::ShardId s : shards) setInProgress(s, true);
  confirmed_ = false;
}

void AkkaManager::terminateRegion(SimPod pod) {
  Region& r = region(pod);
  if (!r.registered) return;
  std::vector<sharding::ShardId> shards;
  for (const auto& [key, shard] : r.shards) shards.push_back(shard);
  std::sort(shards.begin(), shards.end());
  for (sharding::ShardId s : shards) take(s);
  unrank(pod);
  r.registered = false;
  if (--revisions_[r.revision] == 0) revisions_.erase(r.revision);
  if (r.unreachable) --unreachable_;
  for (sharding::ShardId s : shards) allocate(s);
  ledger_.commit(now());
  confirmed_ = false;
}

void AkkaManager::podCrashed(SimPod pod) {
  Region& r = region(pod);
  if (!r.registered || r.unreachable) return;
  r.unreachable = true;
  ++unreachable_;
  confirmed_ = false;
}

void AkkaManager::podGone(SimPod pod) { terminateRegion(pod); }

void AkkaManager::tick() {
  const std::vector<sharding::ShardId> selected = rebalance();
  if (!selected.empty()) {
    std::vector<std::pair<sharding::ShardId, std::int64_t>> handoffs;
    for (sharding::ShardId s : selected) {
      setInProgress(s, true);
      handoffId_[static_cast<std::size_t>(s - 1)] = ++nextHandoff_;
      handoffs.emplace_back(s, nextHandoff_);
    }
    scheduler_.runAfter(params_.handoffTime,
                        [this, h = std::move(handoffs)] { completeHandoffs(h); });
  }
  confirmed_ = selected.empty() && totalInProgress_ == 0 && unallocated_.empty();
  scheduler_.runAfter(params_.rebalanceInterval, [this] { tick(); });
}

void AkkaManager::completeHandoffs(
    const std::vector<std::pair<sharding::ShardId, std::int64_t>>& handoffs) {
  std::vector<sharding::ShardId> done;
  for (const auto& [s, id] : handoffs) {
    const auto i = static_cast<std::size_t>(s - 1);
    // Superseded: its region was terminated meanwhile and the shard allocated again.
    if (!inProgress_[i] || handoffId_[i] != id) continue;
    // A crashed region never acknowledges; the shard moves when the region is terminated.
    if (region(ledger_.owner(s)).unreachable) continue;
    take(s);
    done.push_back(s);
  }
  for (sharding::ShardId s : done) allocate(s);
  ledger_.commit(now());
}

bool AkkaManager::goodTimeToRebalance() const {
  return revisions_.size() == 1 && unreachable_ == 0;
}

std::vector<sharding::ShardId> AkkaManager::rebalance() const {
  return params_.classic ? rebalanceClassic() : rebalanceCurrent();
}

std::vector<sharding::ShardId> AkkaManager::rebalanceClassic() const {
  std::vector<sharding::ShardId> selected;
  if (ranked_.empty() || totalInProgress_ >= params_.maxSimultaneousRebalance) return selected;
  const auto leastCount = static_cast<std::int32_t>(region(ranked_.begin()->second).shards.size());
  const Region& most = region(available_.begin()->second);
  const auto mostCount = static_cast<std::int32_t>(most.shards.size()) - most.inProgress;
  const std::int32_t difference = mostCount - leastCount;
  if (difference <= params_.rebalanceThreshold) return selected;
  const std::int32_t n =
      std::min({difference - params_.rebalanceThreshold, params_.rebalanceThreshold,
                params_.maxSimultaneousRebalance - totalInProgress_});
  for (const auto& [key, shard] : most.shards) {
    if (static_cast<std::int32_t>(selected.size()) >= n) break;
    if (!inProgress_[static_cast<std::size_t>(shard - 1)]) selected.push_back(shard);
  }
  return selected;
}

std::vector<sharding::ShardId> AkkaManager::rebalanceCurrent() const {
  std::vector<sharding::ShardId> selected;
  if (totalInProgress_ > 0 || ranked_.empty() || !goodTimeToRebalance()) return selected;
  const std::int64_t shards = ledger_.shardCount() - ledger_.unassignedCount();
  if (shards == 0) return selected;
  const auto regions = static_cast<std::int64_t>(ranked_.size());
  const std::int64_t optimal = shards / regions + (shards % regions == 0 ? 0 : 1);
  const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(
      1, std::min<std::int64_t>(
             static_cast<std::int64_t>(params_.relativeLimit * static_cast<double>(shards)),
             params_.absoluteLimit)));
  // Regions in suitability order, a group (leaving, version) at a time; within a group they are
  // ordered by count, so the regions with a given count start at a lower_bound.
  const auto from = [&](const Key& group, std::int64_t count) {
    return ranked_.lower_bound({Key{group[0], group[1], count, kMin}, kNoSimPod});
  };
  const auto nextGroup = [&](const Key& group) { return from(Key{group[0], group[1] + 1}, kMin); };

  // Phase 1: regions above optimal offer (count - optimal) of their oldest shards.
  for (auto g = ranked_.begin(); g != ranked_.end(); g = nextGroup(g->first)) {
    for (auto it = from(g->first, optimal + 1);
         it != ranked_.end() && sameGroup(it->first, g->first); ++it) {
      const Region& r = region(it->second);
      auto n = static_cast<std::int64_t>(r.shards.size()) - optimal;
      for (auto s = r.shards.begin(); n > 0 && s != r.shards.end(); ++s, --n) {
        selected.push_back(s->second);
        if (selected.size() == limit) return selected;
      }
    }
  }
  if (!selected.empty()) return selected;

  // Phase 2: when regions are two or more below optimal, each region at optimal gives one.
  std::int64_t countBelow = 0;
  for (auto g = ranked_.begin(); g != ranked_.end(); g = nextGroup(g->first)) {
    for (auto it = g;
         it != ranked_.end() && sameGroup(it->first, g->first) && it->first[2] < optimal - 1;
         ++it) {
      countBelow += optimal - 1 - it->first[2];
    }
  }
  if (countBelow == 0) return selected;
  const auto cap = std::min(static_cast<std::size_t>(countBelow), limit);
  for (auto g = ranked_.begin(); g != ranked_.end(); g = nextGroup(g->first)) {
    for (auto it = from(g->first, optimal); it != ranked_.end() && sameGroup(it->first, g->first);
         ++it) {
      const Region& r = region(it->second);
      if (r.shards.empty()) continue;
      selected.push_back(r.shards.begin()->second);
      if (selected.size() == cap) return selected;
    }
  }
  return selected;
}

bool AkkaManager::settled() const {
  return totalInProgress_ == 0 && unallocated_.empty() && confirmed_;
}

}  // namespace kshard::tools
