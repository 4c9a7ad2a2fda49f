#include "tools/simulate_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace kshard::tools {
namespace {

using std::chrono::seconds;

std::vector<sharding::ShardId> sorted(std::span<const sharding::ShardId> shards) {
  std::vector<sharding::ShardId> v(shards.begin(), shards.end());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(SimulateLedgerTest, FirstOwnerIsAPlacementNotAMove) {
  OwnershipLedger ledger(3);
  ledger.assign(1, 0);
  ledger.assign(2, 0);
  EXPECT_EQ(ledger.placements(), 2);
  EXPECT_EQ(ledger.moves(), 0);
  EXPECT_EQ(ledger.unassignedCount(), 1);
  EXPECT_EQ(ledger.owner(1), 0);
  EXPECT_EQ(ledger.owner(3), kNoSimPod);
}

TEST(SimulateLedgerTest, ChangingOwnerIsOneMove) {
  OwnershipLedger ledger(2);
  ledger.assign(1, 0);
  ledger.assign(1, 1);
  EXPECT_EQ(ledger.moves(), 1);
  EXPECT_EQ(ledger.placements(), 1);
  EXPECT_EQ(ledger.countOf(0), 0);
  EXPECT_EQ(ledger.countOf(1), 1);
}

TEST(SimulateLedgerTest, ReleaseThenPlaceElsewhereIsOneMove) {
  OwnershipLedger ledger(1);
  ledger.assign(1, 0);
  ledger.release(1);
  EXPECT_EQ(ledger.moves(), 0) << "unassigning alone is not a move";
  EXPECT_EQ(ledger.unassignedCount(), 1);
  ledger.assign(1, 1);
  EXPECT_EQ(ledger.moves(), 1) << "placing a shard that had an owner is a move";
  EXPECT_EQ(ledger.placements(), 1);
  EXPECT_EQ(ledger.maxMovesOfOneShard(), 1);
}

TEST(SimulateLedgerTest, AssigningToTheOwnerChangesNothing) {
  OwnershipLedger ledger(1);
  ledger.assign(1, 0);
  ledger.commit(seconds(1));
  ledger.assign(1, 0);
  ledger.commit(seconds(2));
  EXPECT_EQ(ledger.moves(), 0);
  EXPECT_EQ(ledger.rounds(), 1);
  EXPECT_EQ(ledger.lastChange(), seconds(1));
}

TEST(SimulateLedgerTest, RoundsCountInstantsWithChanges) {
  OwnershipLedger ledger(4);
  ledger.assign(1, 0);
  ledger.commit(seconds(0));
  ledger.assign(2, 0);
  ledger.commit(seconds(0));  // same instant: still one round
  ledger.commit(seconds(5));  // nothing changed: no round
  ledger.assign(3, 1);
  ledger.commit(seconds(7));
  ledger.release(3);
  ledger.commit(seconds(9));  // a release alone is not a round
  EXPECT_EQ(ledger.rounds(), 2);
  EXPECT_EQ(ledger.lastChange(), seconds(7));
}

TEST(SimulateLedgerTest, ShardsOfFollowsAssignAndRelease) {
  OwnershipLedger ledger(5);
  for (sharding::ShardId s = 1; s <= 5; ++s) ledger.assign(s, s % 2);
  EXPECT_EQ(sorted(ledger.shardsOf(0)), (std::vector<sharding::ShardId>{2, 4}));
  EXPECT_EQ(sorted(ledger.shardsOf(1)), (std::vector<sharding::ShardId>{1, 3, 5}));
  ledger.release(3);
  ledger.assign(1, 0);
  EXPECT_EQ(sorted(ledger.shardsOf(0)), (std::vector<sharding::ShardId>{1, 2, 4}));
  EXPECT_EQ(sorted(ledger.shardsOf(1)), (std::vector<sharding::ShardId>{5}));
  EXPECT_TRUE(ledger.shardsOf(7).empty());
}

TEST(SimulateLedgerTest, ImbalanceCountsServingPodsOnly) {
  OwnershipLedger ledger(10);
  for (sharding::ShardId s = 1; s <= 6; ++s) ledger.assign(s, 0);
  for (sharding::ShardId s = 7; s <= 8; ++s) ledger.assign(s, 1);
  EXPECT_EQ(ledger.imbalance(), 0) << "no serving pod yet";
  ledger.setServing(0, true);
  ledger.setServing(1, true);
  EXPECT_EQ(ledger.imbalance(), 4);
  ledger.setServing(2, true);  // a serving pod without shards
  EXPECT_EQ(ledger.imbalance(), 6);
  ledger.setServing(0, false);  // a draining pod does not count
  EXPECT_EQ(ledger.imbalance(), 2);
  ledger.assign(9, 2);  // unassigned shards belong to no pod; the counts follow moves
  ledger.assign(10, 2);
  EXPECT_EQ(ledger.imbalance(), 0);
}

TEST(SimulateLedgerTest, WorstImbalanceIsTheMaximumSampled) {
  OwnershipLedger ledger(4);
  ledger.setServing(0, true);
  ledger.setServing(1, true);
  for (sharding::ShardId s = 1; s <= 4; ++s) ledger.assign(s, 0);
  EXPECT_EQ(ledger.worstImbalance(), 0) << "not sampled yet";
  ledger.commit(seconds(1));
  EXPECT_EQ(ledger.worstImbalance(), 4);
  ledger.assign(1, 1);
  ledger.assign(2, 1);
  ledger.commit(seconds(2));
  EXPECT_EQ(ledger.imbalance(), 0);
  EXPECT_EQ(ledger.worstImbalance(), 4);
  ledger.setServing(2, true);
  ledger.sample();
  EXPECT_EQ(ledger.worstImbalance(), 4) << "2 - 0 is below the worst so far";
}

TEST(SimulateLedgerTest, ResetCountersKeepsOwnersAndStartsFromTheCurrentImbalance) {
  OwnershipLedger ledger(3);
  ledger.setServing(0, true);
  ledger.setServing(1, true);
  ledger.assign(1, 0);
  ledger.assign(2, 0);
  ledger.assign(2, 1);
  ledger.commit(seconds(3));
  ledger.resetCounters();
  EXPECT_EQ(ledger.moves(), 0);
  EXPECT_EQ(ledger.placements(), 0);
  EXPECT_EQ(ledger.rounds(), 0);
  EXPECT_EQ(ledger.maxMovesOfOneShard(), 0);
  EXPECT_EQ(ledger.lastChange(), seconds(0));
  EXPECT_EQ(ledger.owner(2), 1);
  EXPECT_EQ(ledger.worstImbalance(), 0);
  ledger.assign(3, 0);
  ledger.assign(3, 1);  // first owner was after the reset: placement, then a move
  EXPECT_EQ(ledger.placements(), 1);
  EXPECT_EQ(ledger.moves(), 1);
}

TEST(SimulateLedgerTest, MaxMovesOfOneShardTracksTheBusiestShard) {
  OwnershipLedger ledger(2);
  ledger.assign(1, 0);
  ledger.assign(2, 0);
  ledger.assign(1, 1);
  ledger.assign(1, 2);
  ledger.assign(1, 0);
  ledger.assign(2, 1);
  EXPECT_EQ(ledger.moves(), 4);
  EXPECT_EQ(ledger.maxMovesOfOneShard(), 3);
}

}  // namespace
}  // namespace kshard::tools
