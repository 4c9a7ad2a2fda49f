// Properties of the planner over thousands of random, seeded maps: the invariants the operator's
// "one owner per shard" guarantee rests on, and the balancing behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sharding/planner.h"
#include "sharding/version.h"

namespace kshard::sharding {
namespace {

constexpr int kMaps = 3000;

struct Scenario {
  PlanningInput input;
  std::uint64_t seed = 0;
};

// A random map: up to 400 shards over up to 25 pods of up to three versions, some not ready or
// terminating, some shards unassigned.
Scenario randomScenario(Random& r, bool oneVersionAllReady) {
  static const char* const kVersions[] = {"1.9.0", "1.10.0", "2.0.0-rc1"};
  Scenario s;
  PlanningInput& in = s.input;
  in.shardCount = static_cast<std::int32_t>(1 + r.uniform(400));
  const auto podCount = static_cast<std::size_t>(r.uniform(26));
  const bool mixed = !oneVersionAllReady && r.uniform(2) == 0;
  for (std::size_t p = 0; p < podCount; ++p) {
    PlannerPod pod;
    pod.version = kVersions[mixed ? r.uniform(3) : 1];
    pod.ready = oneVersionAllReady || r.uniform(8) != 0;
    pod.terminating = !oneVersionAllReady && r.uniform(10) == 0;
    in.pods.push_back(pod);
  }
  // Skewed ownership so that some pods are far above the average.
  const std::uint64_t unassignedPercent = r.uniform(4) == 0 ? r.uniform(100) : 0;
  in.owners.assign(static_cast<std::size_t>(in.shardCount), kNoPod);
  for (PodIndex& owner : in.owners) {
    if (podCount == 0 || r.uniform(100) < unassignedPercent) continue;
    const std::uint64_t a = r.uniform(podCount);
    owner = static_cast<PodIndex>(r.uniform(3) == 0 ? a : std::min(a, r.uniform(podCount)));
  }
  in.immediate = r.uniform(5) == 0;
  in.rebalanceRate = r.uniform(3) == 0 ? 1.0 : 0.001 + 0.999 * r.unit();
  s.seed = r.next();
  return s;
}

std::vector<Move> decideOrFail(const PlanningInput& in, std::uint64_t seed) {
  SeededRandom random(seed);
  StatusOr<std::vector<Move>> moves = decide(in, random);
  EXPECT_TRUE(moves.ok()) << moves.status().toString();
  return moves.valueOr({});
}

std::vector<std::int32_t> countsOf(const PlanningInput& in) {
  std::vector<std::int32_t> counts(in.pods.size(), 0);
  for (PodIndex p : in.owners) {
    if (p != kNoPod) ++counts[static_cast<std::size_t>(p)];
  }
  return counts;
}

// The newest version among ready, non-terminating pods, or nullptr.
const std::string* newestReceivingVersion(const PlanningInput& in) {
  const std::string* newest = nullptr;
  for (const PlannerPod& p : in.pods) {
    if (p.ready && !p.terminating &&
        (newest == nullptr || compareVersions(p.version, *newest) > 0)) {
      newest = &p.version;
    }
  }
  return newest;
}

// Checks every invariant of one round and applies it to `in.owners`.
void checkAndApply(PlanningInput& in, const std::vector<Move>& moves, const std::string& where) {
  const bool anyUnassigned =
      std::find(in.owners.begin(), in.owners.end(), kNoPod) != in.owners.end();
  const bool periodic = !anyUnassigned && !in.immediate;
  const std::string* newest = newestReceivingVersion(in);
  const std::int32_t cap = periodicReceiveCap(in.shardCount, in.rebalanceRate);
  std::vector<bool> moved(static_cast<std::size_t>(in.shardCount), false);
  std::vector<std::int32_t> received(in.pods.size(), 0);
  std::vector<bool> lost(in.pods.size(), false);
  for (const Move& m : moves) {
    ASSERT_GE(m.shard, 1) << where;
    ASSERT_LE(m.shard, in.shardCount) << where;
    ASSERT_GE(m.to, 0) << where;
    ASSERT_LT(m.to, static_cast<PodIndex>(in.pods.size())) << where;
    PodIndex& owner = in.owners[static_cast<std::size_t>(m.shard - 1)];
    // One owner per shard: the move starts from the real owner and each shard moves once.
    ASSERT_FALSE(moved[static_cast<std::size_t>(m.shard - 1)]) << where << " shard moved twice";
    moved[static_cast<std::size_t>(m.shard - 1)] = true;
    ASSERT_EQ(m.from.value_or(kNoPod), owner) << where << " move from a pod that is not the owner";
    ASSERT_NE(m.to, owner) << where << " move to the current owner";
    // Only ready, non-terminating pods of the newest version receive.
    const PlannerPod& target = in.pods[static_cast<std::size_t>(m.to)];
    ASSERT_TRUE(target.ready) << where;
    ASSERT_FALSE(target.terminating) << where;
    ASSERT_NE(newest, nullptr) << where;
    ASSERT_EQ(target.version, *newest) << where << " move to an older version";
    ASSERT_FALSE(lost[static_cast<std::size_t>(m.to)]) << where << " receiver lost a shard";
    if (periodic) {
      ASSERT_LE(++received[static_cast<std::size_t>(m.to)], cap) << where << " cap exceeded";
      ASSERT_TRUE(in.withheld.empty() || !in.withheld[static_cast<std::size_t>(m.shard - 1)])
          << where << " a withheld shard moved";
    } else {
      ASSERT_EQ(owner, kNoPod) << where << " placement round moved an assigned shard";
    }
    if (owner != kNoPod) lost[static_cast<std::size_t>(owner)] = true;
    owner = m.to;
  }
  if (!periodic && newest != nullptr) {
    // A placement round leaves nothing unassigned when some pod can receive.
    ASSERT_EQ(std::count(in.owners.begin(), in.owners.end(), kNoPod), 0) << where;
  }
}

bool allSameVersion(const PlanningInput& in) {
  return std::all_of(in.pods.begin(), in.pods.end(),
                     [&](const PlannerPod& p) { return p.version == in.pods.front().version; });
}

TEST(PlannerPropertyTest, RoundsKeepOneOwnerPerShardAndOnlyFeedEligiblePods) {
  SeededRandom r(20260101);
  for (int i = 0; i < kMaps; ++i) {
    Scenario s = randomScenario(r, false);
    const bool anyUnassigned =
        std::find(s.input.owners.begin(), s.input.owners.end(), kNoPod) != s.input.owners.end();
    const std::vector<Move> moves = decideOrFail(s.input, s.seed);
    if (!anyUnassigned && !s.input.immediate && !allSameVersion(s.input)) {
      EXPECT_TRUE(moves.empty()) << "map " << i << ": balanced during a rolling update";
    }
    checkAndApply(s.input, moves, "map " + std::to_string(i));
    if (HasFatalFailure()) return;
  }
}

TEST(PlannerPropertyTest, WithheldShardsStayWhereTheyAreInPeriodicRounds) {
  SeededRandom r(35);
  for (int i = 0; i < kMaps; ++i) {
    Scenario s = randomScenario(r, r.uniform(2) == 0);
    const std::uint64_t percent = r.uniform(101);
    s.input.withheld.assign(static_cast<std::size_t>(s.input.shardCount), false);
    for (std::size_t k = 0; k < s.input.withheld.size(); ++k) {
      s.input.withheld[k] = r.uniform(100) < percent;
    }
    checkAndApply(s.input, decideOrFail(s.input, s.seed), "map " + std::to_string(i));
    if (HasFatalFailure()) return;
  }
}

TEST(PlannerPropertyTest, SameInputAndSeedGiveTheSameDecision) {
  SeededRandom r(7);
  for (int i = 0; i < 200; ++i) {
    const Scenario s = randomScenario(r, false);
    EXPECT_EQ(decideOrFail(s.input, s.seed), decideOrFail(s.input, s.seed)) << "map " << i;
  }
}

TEST(PlannerPropertyTest, RepeatedPeriodicRoundsWithOneVersionConverge) {
  SeededRandom r(99);
  for (int i = 0; i < kMaps; ++i) {
    Scenario s = randomScenario(r, true);
    if (s.input.pods.empty()) continue;
    s.input.immediate = false;
    const std::string where = "map " + std::to_string(i);
    // Each round while unbalanced moves at least one shard from a fullest pod towards an emptiest
    // one, so the number of rounds is bounded by the number of shards (plus the placement round).
    int rounds = 0;
    for (;; ++rounds) {
      ASSERT_LE(rounds, s.input.shardCount + 2) << where << ": no convergence";
      const std::vector<Move> moves = decideOrFail(s.input, s.seed + static_cast<unsigned>(rounds));
      if (moves.empty()) break;
      checkAndApply(s.input, moves, where);
      if (HasFatalFailure()) return;
    }
    const std::vector<std::int32_t> counts = countsOf(s.input);
    const auto [min, max] = std::minmax_element(counts.begin(), counts.end());
    EXPECT_LE(*max - *min, 1) << where << " after " << rounds << " rounds";
    EXPECT_EQ(std::count(s.input.owners.begin(), s.input.owners.end(), kNoPod), 0) << where;
  }
}

TEST(PlannerPropertyTest, ARoundOnABalancedMapMovesNothing) {
  SeededRandom r(5);
  for (int i = 0; i < kMaps; ++i) {
    PlanningInput in;
    in.shardCount = static_cast<std::int32_t>(1 + r.uniform(400));
    const auto podCount = static_cast<std::int32_t>(1 + r.uniform(25));
    in.pods.assign(static_cast<std::size_t>(podCount), PlannerPod{"1.0.0", true, false});
    // Deal the shards round-robin to a random rotation of pods, in a random shard order.
    std::vector<ShardId> order(static_cast<std::size_t>(in.shardCount));
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = static_cast<ShardId>(k + 1);
    for (std::size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[r.uniform(k)]);
    const auto offset = static_cast<std::int32_t>(r.uniform(static_cast<std::uint64_t>(podCount)));
    in.owners.assign(order.size(), kNoPod);
    for (std::size_t k = 0; k < order.size(); ++k) {
      in.owners[static_cast<std::size_t>(order[k] - 1)] =
          (static_cast<std::int32_t>(k) + offset) % podCount;
    }
    in.rebalanceRate = r.uniform(2) == 0 ? 1.0 : 0.02;
    in.immediate = r.uniform(2) == 0;
    EXPECT_TRUE(decideOrFail(in, r.next()).empty()) << "map " << i;
  }
}

}  // namespace
}  // namespace kshard::sharding
