#include "sidecar/ownership_sync.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/sidecar/held_host.h"
#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

using ::testing::ElementsAre;
using testing::HeldHost;
using ::testing::IsEmpty;
using testing::makeMap;

const protocol::Target kP1{"p1", "p1-uid", "p1-inc"};

class OwnershipSyncTest : public ::testing::Test {
 protected:
  RoutingSnapshot snapshotOf(const sharding::ShardMap& m) {
    RoutingTable t;
    EXPECT_TRUE(t.update(m));
    return *t.snapshot();
  }
  HeldHost host_;
  ManualScheduler scheduler_;
  EntityRegistry registry_{host_, scheduler_, {}, Logger("test", LogLevel::kError)};
};

TEST_F(OwnershipSyncTest, ReleasesShardsTheMapGaveAwayAtANewerEpoch) {
  ASSERT_THAT(registry_.assign({1, 2, 3}, 4), IsEmpty());
  auto r = syncOwnership(snapshotOf(makeMap(4, 6, {{"p1", "1-2"}, {"p2", "3"}})), kP1, registry_);
  EXPECT_EQ(r.revoked, 1u);
  EXPECT_THAT(registry_.ownedShards(), ElementsAre(1, 2));
}

TEST_F(OwnershipSyncTest, KeepsShardsWhenTheMapIsNotNewer) {
  ASSERT_THAT(registry_.assign({1, 2, 3}, 6), IsEmpty());
  auto r = syncOwnership(snapshotOf(makeMap(4, 6, {{"p2", "1-4"}})), kP1, registry_);
  EXPECT_EQ(r.revoked, 0u);
  EXPECT_THAT(registry_.ownedShards(), ElementsAre(1, 2, 3));
}

TEST_F(OwnershipSyncTest, ReleasesShardsTheMapLeftUnassigned) {
  ASSERT_THAT(registry_.assign({1, 2}, 4), IsEmpty());
  syncOwnership(snapshotOf(makeMap(4, 5, {{"p1", "1"}})), kP1, registry_);
  EXPECT_THAT(registry_.ownedShards(), ElementsAre(1));
}

TEST_F(OwnershipSyncTest, AdoptsShardsTheMapGivesThisPod) {
  auto r = syncOwnership(snapshotOf(makeMap(4, 7, {{"p1", "1-2"}, {"p2", "3-4"}})), kP1, registry_);
  EXPECT_EQ(r.adopted, 2u);
  EXPECT_THAT(registry_.ownedShards(), ElementsAre(1, 2));
  EXPECT_EQ(registry_.ownedEpoch(1), 7u);
}

TEST_F(OwnershipSyncTest, DoesNotAdoptForAnotherIncarnationOfThePod) {
  // Same pod name, other uid: the map speaks of an earlier pod that the operator will drop.
  auto r = syncOwnership(snapshotOf(makeMap(4, 7, {{"p1", "1-4"}})), {"p1", "other-uid", "p1-inc"}, registry_);
  EXPECT_EQ(r.adopted, 0u);
  EXPECT_THAT(registry_.ownedShards(), IsEmpty());
}

TEST_F(OwnershipSyncTest, DoesNotAdoptForAnotherSidecarProcessOfThePod) {
  // The map names this pod as registered by an earlier sidecar process (this one restarted and
  // has not registered yet): its entities were dropped with the app's reset, and the operator
  // assigns the shards again once this process has registered.
  auto r = syncOwnership(snapshotOf(makeMap(4, 7, {{"p1", "1-4"}})), {"p1", "p1-uid", "later"},
                         registry_);
  EXPECT_EQ(r.adopted, 0u);
  EXPECT_THAT(registry_.ownedShards(), IsEmpty());
}

TEST_F(OwnershipSyncTest, AdoptionRespectsEpochFences) {
  ASSERT_THAT(registry_.assign({1}, 4), IsEmpty());
  registry_.unassign({1}, 6, std::chrono::seconds(1), [](std::vector<ShardId>) {});
  // A late copy of the map from before the unassign still names this pod.
  auto r = syncOwnership(snapshotOf(makeMap(4, 5, {{"p1", "1"}})), kP1, registry_);
  EXPECT_EQ(r.adopted, 0u);
  EXPECT_FALSE(registry_.owns(1));
}

// The operator releases a vanished pod (unassign at the epoch its removal will persist at, e+1)
// before it writes that removal; a round in between may write e+1 with the pod still named. The
// pod's watch must not take the shards back from that map: a command at e+1 may, a map may not.
TEST_F(OwnershipSyncTest, AMapAtTheEpochOfAnUnassignDoesNotGiveTheShardsBack) {
  ASSERT_THAT(registry_.assign({1, 2}, 4), IsEmpty());
  registry_.unassign({1, 2}, 5, std::chrono::seconds(1), [](std::vector<ShardId>) {});
  scheduler_.runDue();
  ASSERT_FALSE(registry_.owns(1));
  auto r = syncOwnership(snapshotOf(makeMap(4, 5, {{"p1", "1-2"}})), kP1, registry_);
  EXPECT_EQ(r.adopted, 0u);
  EXPECT_THAT(registry_.ownedShards(), IsEmpty());
  // A newer map does give them back, and so does a command at the unassign's epoch.
  r = syncOwnership(snapshotOf(makeMap(4, 6, {{"p1", "1"}})), kP1, registry_);
  EXPECT_EQ(r.adopted, 1u);
  EXPECT_THAT(registry_.assign({2}, 5), IsEmpty());
  EXPECT_THAT(registry_.ownedShards(), ElementsAre(1, 2));
}

}  // namespace
}  // namespace kshard::sidecar
