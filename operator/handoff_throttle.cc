#include "operator/handoff_throttle.h"

#include <algorithm>

namespace kshard::manager {

Duration handoffBackoff(std::int32_t inARow, const sharding::ShardMapSpec& spec) {
  const std::int32_t limit = spec.handoffFailureLimit;
  if (limit <= 0 || inARow < limit) return Duration::zero();
  Duration backoff = std::min<Duration>(spec.handoffBackoff, kMaxHandoffBackoff);
  // Doubling stops at the cap, so no count of failures overflows.
  for (std::int32_t i = limit; i < inARow && backoff < kMaxHandoffBackoff; ++i) backoff *= 2;
  return std::min<Duration>(backoff, kMaxHandoffBackoff);
}

std::optional<ThrottleStart> HandoffThrottle::failed(sharding::ShardId shard,
                                                     const sharding::RegisteredPod& from,
                                                     SteadyTime now,
                                                     const sharding::ShardMapSpec& spec) {
  Failures& f = failures_[shard];
  if (f.pod != from.name || f.uid != from.uid) f = Failures{from.name, from.uid, 0, now};
  ++f.inARow;
  f.last = now;
  const Duration backoff = handoffBackoff(f.inARow, spec);
  if (backoff <= Duration::zero()) return std::nullopt;
  return ThrottleStart{shard, f.inARow, now + backoff, backoff};
}

void HandoffThrottle::forgetMoved(const sharding::ShardTable& table,
                                  const std::vector<sharding::RegisteredPod>& pods) {
  std::erase_if(failures_, [&](const auto& entry) {
    const auto& [shard, f] = entry;
    if (shard < 1 || shard > table.shardCount()) return true;
    const sharding::PodIndex owner = table.owner(shard);
    if (owner == sharding::kNoPod || static_cast<std::size_t>(owner) >= pods.size()) return true;
    const sharding::RegisteredPod& p = pods[static_cast<std::size_t>(owner)];
    return p.name != f.pod || p.uid != f.uid;
  });
}

bool HandoffThrottle::inBackoff(const Failures& f, SteadyTime now,
                                const sharding::ShardMapSpec& spec) const {
  const Duration backoff = handoffBackoff(f.inARow, spec);
  return backoff > Duration::zero() && now < f.last + backoff;
}

std::vector<bool> HandoffThrottle::withheld(std::int32_t shardCount, SteadyTime now,
                                            const sharding::ShardMapSpec& spec) const {
  std::vector<bool> out;
  for (const auto& [shard, f] : failures_) {
    if (shard < 1 || shard > shardCount || !inBackoff(f, now, spec)) continue;
    if (out.empty()) out.assign(static_cast<std::size_t>(shardCount), false);
    out[static_cast<std::size_t>(shard - 1)] = true;
  }
  return out;
}

std::size_t HandoffThrottle::throttled(SteadyTime now, const sharding::ShardMapSpec& spec) const {
  return static_cast<std::size_t>(
      std::count_if(failures_.begin(), failures_.end(),
                    [&](const auto& e) { return inBackoff(e.second, now, spec); }));
}

std::int32_t HandoffThrottle::failuresOf(sharding::ShardId shard) const {
  auto it = failures_.find(shard);
  return it == failures_.end() ? 0 : it->second.inARow;
}

}  // namespace kshard::manager
