#include "sidecar/singleton_keeper.h"

#include <gtest/gtest.h>

#include "sharding/shard_id.h"
#include "tests/sidecar/held_host.h"

namespace kshard::sidecar {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::HeldHost;

constexpr std::int32_t kShards = 16;

ShardId shardOf(const std::string& name) { return *sharding::shardIdOf(name, kShards); }

class SingletonKeeperTest : public ::testing::Test {
 protected:
  SingletonKeeperTest()
      : registry_(host_, scheduler_, EntityRegistryOptions{}, Logger("test", LogLevel::kError)),
        keeper_(registry_, Logger("test", LogLevel::kError)) {}

  HeldHost host_;
  ManualScheduler scheduler_;
  EntityRegistry registry_;
  SingletonKeeper keeper_;
};

TEST_F(SingletonKeeperTest, StartsASingletonWhenItsShardIsTakenAndOnlyThen) {
  keeper_.update({"ticker"}, kShards);
  EXPECT_TRUE(host_.starts.empty()) << "started on a shard this pod does not own";
  const ShardId other = shardOf("ticker") % kShards + 1;
  ASSERT_TRUE(registry_.assign({other}, 1).empty());
  EXPECT_TRUE(host_.starts.empty()) << "started on another shard's take";
  ASSERT_TRUE(registry_.assign({shardOf("ticker")}, 2).empty());
  ASSERT_EQ(host_.starts.size(), 1u);
  EXPECT_EQ(host_.starts[0].key, singletonKey("ticker"));
  EXPECT_EQ(host_.starts[0].shard, shardOf("ticker"));
  host_.completeStart();
  scheduler_.advance(minutes(10));
  EXPECT_TRUE(host_.stops.empty()) << "a singleton was passivated for idleness";
}

TEST_F(SingletonKeeperTest, ASingletonAddedToTheSpecStartsOnTheOwnerAtOnce) {
  ASSERT_TRUE(registry_.assign({shardOf("ticker")}, 1).empty());
  EXPECT_FALSE(keeper_.declared("ticker"));
  keeper_.update({"ticker"}, kShards);
  EXPECT_TRUE(keeper_.declared("ticker"));
  ASSERT_EQ(host_.starts.size(), 1u);
  host_.completeStart();
  keeper_.update({"ticker"}, kShards);
  EXPECT_TRUE(host_.starts.empty()) << "a running singleton was started again";
}

TEST_F(SingletonKeeperTest, ASingletonRemovedFromTheSpecIsStopped) {
  ASSERT_TRUE(registry_.assign({shardOf("ticker")}, 1).empty());
  keeper_.update({"ticker"}, kShards);
  host_.completeStart();
  keeper_.update({}, kShards);
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(host_.stops[0].key, singletonKey("ticker"));
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(SingletonKeeperTest, AMessageThatReachesASingletonFirstWaitsForItsStart) {
  const ShardId shard = shardOf("ticker");
  ASSERT_TRUE(registry_.assign({shard}, 1).empty());
  Message m;
  m.key = singletonKey("ticker");
  m.shard = shard;
  std::vector<DeliveryOutcome> got;
  registry_.deliver(m, [&got](DeliveryOutcome o) { got.push_back(std::move(o)); });
  ASSERT_EQ(host_.starts.size(), 1u) << "a singleton got a message before its start";
  EXPECT_TRUE(host_.deliveries.empty());
  keeper_.update({"ticker"}, kShards);  // its keeper comes late: nothing more
  host_.completeStart();
  ASSERT_EQ(host_.deliveries.size(), 1u);
  host_.completeDelivery();
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(registry_.pinned(singletonKey("ticker")));
}

}  // namespace
}  // namespace kshard::sidecar
