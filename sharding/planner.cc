#include "sharding/planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <string_view>
#include <utility>

#include "sharding/version.h"

namespace kshard::sharding {

Status validatePlanningInput(const PlanningInput& in) {
  if (in.shardCount < kMinShardCount || in.shardCount > kMaxShardCount) {
    return invalidArgument("shard count " + std::to_string(in.shardCount) + " is outside " +
                           std::to_string(kMinShardCount) + ".." + std::to_string(kMaxShardCount));
  }
  if (in.owners.size() != static_cast<std::size_t>(in.shardCount)) {
    return invalidArgument("owners has " + std::to_string(in.owners.size()) + " entries for " +
                           std::to_string(in.shardCount) + " shards");
  }
  if (in.pods.size() > static_cast<std::size_t>(std::numeric_limits<PodIndex>::max())) {
    return invalidArgument("too many pods");
  }
  const auto podCount = static_cast<PodIndex>(in.pods.size());
  for (std::size_t i = 0; i < in.owners.size(); ++i) {
    if (in.owners[i] < kNoPod || in.owners[i] >= podCount) {
      return invalidArgument("shard " + std::to_string(i + 1) + " is owned by pod index " +
                             std::to_string(in.owners[i]) + ", outside the " +
                             std::to_string(podCount) + " pods");
    }
  }
  if (!(in.rebalanceRate > 0 && in.rebalanceRate <= 1)) {
    return invalidArgument("rebalanceRate must be > 0 and <= 1");
  }
  if (!in.withheld.empty() && in.withheld.size() != in.owners.size()) {
    return invalidArgument("withheld has " + std::to_string(in.withheld.size()) + " entries for " +
                           std::to_string(in.shardCount) + " shards");
  }
  return {};
}

std::vector<bool> eligibleReceivers(const std::vector<PlannerPod>& pods) {
  std::vector<bool> eligible(pods.size(), false);
  const PlannerPod* newest = nullptr;
  for (const PlannerPod& p : pods) {
    if (!p.ready || p.terminating) continue;
    if (newest == nullptr || compareVersions(p.version, newest->version) > 0) newest = &p;
  }
  if (newest == nullptr) return eligible;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    // compareVersions is 0 only for identical strings, so this is one exact version.
    eligible[i] = pods[i].ready && !pods[i].terminating && pods[i].version == newest->version;
  }
  return eligible;
}

bool allSameVersion(const std::vector<PlannerPod>& pods) {
  return std::all_of(pods.begin(), pods.end(),
                     [&](const PlannerPod& p) { return p.version == pods.front().version; });
}

namespace {

// The pods that may receive shards in this round, cheapest first: (count, registration index),
// so ties go to the pod registered first. A binary heap with lazy deletion: an entry is stale
// once its pod's count changed or the pod left the set, and is skipped when it reaches the top.
// One pop and one push per move keeps a round O(moves log pods).
class Receivers {
 public:
  Receivers(const std::vector<std::int32_t>& counts, std::vector<bool> eligible)
      : counts_(counts), member_(std::move(eligible)) {
    std::vector<std::uint64_t> entries;
    for (std::size_t p = 0; p < member_.size(); ++p) {
      if (member_[p]) entries.push_back(key(counts_[p], static_cast<PodIndex>(p)));
    }
    heap_ = Heap(std::greater<>(), std::move(entries));
  }

  // The cheapest receiver, or kNoPod.
  PodIndex top() {
    while (!heap_.empty()) {
      const std::uint64_t k = heap_.top();
      const auto p = static_cast<PodIndex>(k & 0xFFFFFFFFu);
      if (member_[static_cast<std::size_t>(p)] &&
          key(counts_[static_cast<std::size_t>(p)], p) == k) {
        return p;
      }
      heap_.pop();
    }
    return kNoPod;
  }

  void remove(PodIndex p) { member_[static_cast<std::size_t>(p)] = false; }

  // Call after counts[p] changed while p stays a receiver.
  void update(PodIndex p) {
    if (member_[static_cast<std::size_t>(p)])
      heap_.push(key(counts_[static_cast<std::size_t>(p)], p));
  }

 private:
  using Heap = std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<>>;

  static std::uint64_t key(std::int32_t count, PodIndex p) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(count)) << 32) |
           static_cast<std::uint32_t>(p);
  }

  const std::vector<std::int32_t>& counts_;
  std::vector<bool> member_;
  Heap heap_;
};

// The shards a periodic round offers, in the order they are placed (see planner.h, step 1).
std::vector<ShardId> offeredShards(const PlanningInput& in, const std::vector<std::int32_t>& counts,
                                   Random& random) {
  std::vector<ShardId> offered;
  if (in.pods.empty() || !allSameVersion(in.pods)) return offered;
  const std::int32_t average = in.shardCount / static_cast<std::int32_t>(in.pods.size());
  std::vector<PodIndex> donors;
  for (std::size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] > average) donors.push_back(static_cast<PodIndex>(p));
  }
  if (donors.empty()) return offered;
  std::sort(donors.begin(), donors.end(), [&](PodIndex a, PodIndex b) {
    const std::int32_t ca = counts[static_cast<std::size_t>(a)];
    const std::int32_t cb = counts[static_cast<std::size_t>(b)];
    return ca != cb ? ca > cb : a < b;
  });
  // Each pod's shards, contiguous and ascending (counting sort by owner): O(shards + pods).
  std::vector<std::int32_t> start(counts.size() + 1, 0);
  for (std::size_t p = 0; p < counts.size(); ++p) start[p + 1] = start[p] + counts[p];
  std::vector<ShardId> byOwner(static_cast<std::size_t>(start.back()));
  std::vector<std::int32_t> next(start.begin(), start.end() - 1);
  for (std::size_t i = 0; i < in.owners.size(); ++i) {
    if (in.owners[i] != kNoPod) {
      byOwner[static_cast<std::size_t>(next[static_cast<std::size_t>(in.owners[i])]++)] =
          static_cast<ShardId>(i + 1);
    }
  }
  for (PodIndex p : donors) {
    const auto first = static_cast<std::size_t>(start[static_cast<std::size_t>(p)]);
    const auto begin = byOwner.begin() + static_cast<std::ptrdiff_t>(first);
    const auto end = begin + counts[static_cast<std::size_t>(p)];
    // Withheld shards go last and are never sampled. Stable, so that without any the sample is
    // the one a seed gave before withheld shards existed.
    const auto offerable = [&](ShardId s) {
      return in.withheld.empty() || !in.withheld[static_cast<std::size_t>(s - 1)];
    };
    const auto n = static_cast<std::size_t>(std::stable_partition(begin, end, offerable) - begin);
    const auto extra =
        std::min(n, static_cast<std::size_t>(counts[static_cast<std::size_t>(p)] - average));
    // Partial Fisher-Yates: a uniform random sample of `extra` of the pod's n offerable shards.
    for (std::size_t i = 0; i < extra; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(random.uniform(n - i));
      std::swap(byOwner[first + i], byOwner[first + j]);
      offered.push_back(byOwner[first + i]);
    }
  }
  return offered;
}

}  // namespace

std::int32_t periodicReceiveCap(std::int32_t shardCount, double rebalanceRate) {
  const double exact = static_cast<double>(shardCount) * rebalanceRate;
  const double nearest = std::round(exact);
  const double cap =
      std::abs(exact - nearest) <= 1e-9 * std::max(1.0, exact) ? nearest : std::ceil(exact);
  return static_cast<std::int32_t>(std::clamp(cap, 1.0, static_cast<double>(shardCount)));
}

StatusOr<std::vector<Move>> decide(const PlanningInput& in, Random& random) {
  if (Status s = validatePlanningInput(in); !s.ok()) return s;

  std::vector<std::int32_t> counts(in.pods.size(), 0);
  std::vector<ShardId> toPlace;
  for (std::size_t i = 0; i < in.owners.size(); ++i) {
    if (in.owners[i] == kNoPod) {
      toPlace.push_back(static_cast<ShardId>(i + 1));
    } else {
      ++counts[static_cast<std::size_t>(in.owners[i])];
    }
  }
  // Unassigned shards take precedence over balancing: entities on them are unreachable.
  const bool periodic = toPlace.empty() && !in.immediate;
  if (periodic) toPlace = offeredShards(in, counts, random);

  std::vector<Move> moves;
  if (toPlace.empty()) return moves;
  const std::int32_t cap = periodic ? periodicReceiveCap(in.shardCount, in.rebalanceRate)
                                    : std::numeric_limits<std::int32_t>::max();
  std::vector<std::int32_t> received(in.pods.size(), 0);
  std::vector<bool> eligible = eligibleReceivers(in.pods);
  // In a periodic round a pod receives only while it is below the balanced share,
  // ceil(shards / pods that can receive). A pod above it that took shards from a pod even further
  // above would give them up again later (to the pods the round's rate cap kept from taking more
  // now), so each such shard would move twice. The least loaded receiver is always below that
  // share while the map is unbalanced, so rounds still converge to max - min <= 1.
  const auto receiving =
      static_cast<std::int32_t>(std::count(eligible.begin(), eligible.end(), true));
  const std::int32_t share = periodic && receiving > 0 ? (in.shardCount + receiving - 1) / receiving
                                                       : std::numeric_limits<std::int32_t>::max();
  for (std::size_t p = 0; p < eligible.size(); ++p) {
    if (counts[p] >= share) eligible[p] = false;
  }
  Receivers receivers(counts, eligible);

  for (ShardId shard : toPlace) {
    const PodIndex to = receivers.top();
    // Receivers only ever leave the set, so once it is empty no later shard can move either.
    if (to == kNoPod) break;
    const PodIndex from = in.owners[static_cast<std::size_t>(shard - 1)];
    if (from == to) continue;
    // Moving to a pod with only one shard fewer (or more) than the owner would not improve the
    // balance; it would just swap which pod has the extra shard, at the cost of a handoff.
    if (from != kNoPod &&
        counts[static_cast<std::size_t>(to)] + 1 >= counts[static_cast<std::size_t>(from)]) {
      continue;
    }
    moves.push_back({shard, from == kNoPod ? std::nullopt : std::optional<PodIndex>(from), to});
    if (from != kNoPod) {
      --counts[static_cast<std::size_t>(from)];
      // A pod that gave a shard away in this round takes none back in the same round (Shardcake);
      // otherwise shards could ping-pong between the pods of one round.
      receivers.remove(from);
    }
    ++counts[static_cast<std::size_t>(to)];
    if (++received[static_cast<std::size_t>(to)] >= cap ||
        counts[static_cast<std::size_t>(to)] >= share) {
      receivers.remove(to);
    } else {
      receivers.update(to);
    }
  }
  return moves;
}

}  // namespace kshard::sharding
