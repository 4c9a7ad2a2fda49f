// EntityRegistry::sampleLoad: what each owned shard costs, measured on a simulated clock.
#include <gtest/gtest.h>

#include "base/scheduler.h"
#include "sidecar/entity_registry.h"
#include "tests/sidecar/held_host.h"

namespace kshard::sidecar {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class ShardLoadTest : public ::testing::Test {
 protected:
  ShardLoadTest() : registry_(host_, scheduler_, {}, Logger("test", LogLevel::kError)) {
    registry_.assign({1, 2, 3}, 1);
  }

  // `count` messages to distinct entities of `shard`, each at the app for `atApp`.
  void traffic(ShardId shard, int count, Duration atApp) {
    for (int i = 0; i < count; ++i) {
      Message m;
      m.key = {"counter", "s" + std::to_string(shard) + "-" + std::to_string(i)};
      m.shard = shard;
      registry_.deliver(std::move(m), [](DeliveryOutcome&&) {});
      scheduler_.advance(atApp);
      host_.completeDelivery();
    }
  }

  testing::HeldHost host_;
  ManualScheduler scheduler_;
  EntityRegistry registry_;
};

TEST_F(ShardLoadTest, CountsMessagesAndTheAppsTimePerShardAsDecayedRates) {
  traffic(1, 10, milliseconds(100));  // 10 messages, 1 s at the app, over the first second
  scheduler_.advance(seconds(9));     // 10 s since the shards were taken
  // The first sample is the rate over the time measured, whatever the half-life.
  const std::vector<ShardLoad> first = registry_.sampleLoad(seconds(10));
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].shard, 1);
  EXPECT_DOUBLE_EQ(first[0].messagesPerSecond, 10.0 / 10);
  EXPECT_NEAR(first[0].busy, 1.0 / 10, 1e-9);
  EXPECT_EQ(first[0].entities, 10u);
  EXPECT_EQ(first[1].messagesPerSecond, 0);
  EXPECT_EQ(first[2].busy, 0);

  // 10 s without traffic, one half-life: the new interval weighs 1/2 against the past's 1/2 x
  // 1/2, so the average is (1/4 x 1 + 1/2 x 0) / (1/4 + 1/2) = 1/3 of the first rate.
  scheduler_.advance(seconds(10));
  const std::vector<ShardLoad> second = registry_.sampleLoad(seconds(10));
  EXPECT_DOUBLE_EQ(second[0].messagesPerSecond, 1.0 / 3);
  EXPECT_NEAR(second[0].busy, 0.1 / 3, 1e-9);
}

TEST_F(ShardLoadTest, AShardTakenLaterIsMeasuredFromWhenItWasTaken) {
  scheduler_.advance(seconds(8));
  registry_.assign({4}, 2);
  traffic(4, 20, milliseconds(50));  // 20 messages over 1 s, its first second as ours
  scheduler_.advance(seconds(1));     // 2 s since it was taken, 10 since the registry began
  const std::vector<ShardLoad> load = registry_.sampleLoad(seconds(60));
  ASSERT_EQ(load.size(), 4u);
  EXPECT_EQ(load[3].shard, 4);
  // Over the 2 s it was ours, not the 10 s since the last sample, and not damped by the
  // minute-long half-life.
  EXPECT_DOUBLE_EQ(load[3].messagesPerSecond, 20.0 / 2);
  EXPECT_NEAR(load[3].busy, 1.0 / 2, 1e-9);
}

TEST_F(ShardLoadTest, OnlyOwnedShardsAreListedAndRefusedMessagesDoNotCount) {
  Message stray;
  stray.key = {"counter", "x"};
  stray.shard = 9;  // not owned: refused
  registry_.deliver(std::move(stray), [](DeliveryOutcome&&) {});
  scheduler_.advance(seconds(1));
  const std::vector<ShardLoad> load = registry_.sampleLoad(seconds(10));
  ASSERT_EQ(load.size(), 3u);
  for (const ShardLoad& s : load) {
    EXPECT_NE(s.shard, 9);
    EXPECT_EQ(s.messagesPerSecond, 0) << s.shard;
  }
}

TEST_F(ShardLoadTest, ASampleRightAfterAnotherChangesNothing) {
  traffic(2, 4, milliseconds(250));
  scheduler_.advance(seconds(3));
  const std::vector<ShardLoad> a = registry_.sampleLoad(seconds(10));
  const std::vector<ShardLoad> b = registry_.sampleLoad(seconds(10));
  EXPECT_DOUBLE_EQ(a[1].messagesPerSecond, b[1].messagesPerSecond);
  EXPECT_DOUBLE_EQ(a[1].busy, b[1].busy);
}

TEST_F(ShardLoadTest, AShardThatWentQuietReachesZeroRatherThanDecayingForever) {
  traffic(1, 10, milliseconds(100));
  // Sampled every 20 s, as the operator's pings do, with no more traffic: each sample keeps
  // 0.79 of the rate, which without a floor would settle on the smallest subnormal for good.
  double busy = 1;
  for (int i = 0; i < 10000 && busy > 0; ++i) {
    scheduler_.advance(seconds(20));
    busy = registry_.sampleLoad(seconds(60))[0].busy;
  }
  EXPECT_EQ(busy, 0);
}

}  // namespace
}  // namespace kshard::sidecar
