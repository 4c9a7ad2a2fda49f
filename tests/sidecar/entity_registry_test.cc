#include "sidecar/entity_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "tests/sidecar/held_host.h"

namespace kshard::sidecar {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

using testing::HeldHost;

using testing::msg;
using testing::Outcomes;

class EntityRegistryTest : public ::testing::Test {
 protected:
  EntityRegistryTest()
      : registry_(host_, scheduler_, options(), Logger("test", LogLevel::kError)) {}

  static constexpr std::size_t kMaxStops = 64;

  static EntityRegistryOptions options(std::size_t maxConcurrentStops = kMaxStops) {
    EntityRegistryOptions o;
    o.idleTimeout = seconds(60);
    o.maxMailbox = 3;
    o.maxConcurrentStops = maxConcurrentStops;
    return o;
  }

  // Delivers one message to each entity and lets it finish: they are active and idle.
  void startIdle(EntityRegistry& registry, HeldHost& host, ShardId shard,
                 const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
      registry.deliver(msg(id, shard), out_.callback());
      host.completeDelivery();
    }
  }
  static std::vector<std::string> heldStops(const HeldHost& host) {
    std::vector<std::string> ids;
    for (const auto& s : host.stops) ids.push_back(s.key.id);
    return ids;
  }

  HeldHost host_;
  ManualScheduler scheduler_;
  EntityRegistry registry_;
  Outcomes out_;
};

TEST_F(EntityRegistryTest, RefusesMessagesForShardsItDoesNotOwn) {
  registry_.deliver(msg("a", 7), out_.callback());
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kNotOwned);
  EXPECT_TRUE(host_.deliveries.empty());
}

TEST_F(EntityRegistryTest, DeliversOneMessageAtATimePerEntityInOrder) {
  ASSERT_THAT(registry_.assign({7}, 3), IsEmpty());
  registry_.deliver(msg("a", 7, "1"), out_.callback());
  registry_.deliver(msg("a", 7, "2"), out_.callback());
  registry_.deliver(msg("a", 7, "3"), out_.callback());
  ASSERT_EQ(host_.deliveries.size(), 1u) << "a second message reached a busy entity";
  EXPECT_EQ(host_.deliveries[0].message.body, "1");
  EXPECT_EQ(host_.deliveries[0].epoch, 3u);
  host_.completeDelivery();
  ASSERT_EQ(host_.deliveries.size(), 1u);
  EXPECT_EQ(host_.deliveries[0].message.body, "2");
  host_.completeDelivery();
  host_.completeDelivery();
  ASSERT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(out_.got[0].response->body, "1");
  EXPECT_EQ(out_.got[1].response->body, "2");
  EXPECT_EQ(out_.got[2].response->body, "3");
}

TEST_F(EntityRegistryTest, DifferentEntitiesRunConcurrently) {
  ASSERT_THAT(registry_.assign({7, 8}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  registry_.deliver(msg("b", 7), out_.callback());
  registry_.deliver(msg("c", 8), out_.callback());
  EXPECT_EQ(host_.deliveries.size(), 3u);
  EXPECT_EQ(registry_.activeEntities(), 3u);
}

TEST_F(EntityRegistryTest, TellIsAnsweredWhenQueuedAndStillDelivered) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7, "x", DeliveryMode::kTell), out_.callback());
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_FALSE(out_.got[0].refusal.has_value());
  EXPECT_EQ(out_.got[0].response->status, 202);
  ASSERT_EQ(host_.deliveries.size(), 1u);
  host_.completeDelivery();
  EXPECT_EQ(out_.got.size(), 1u) << "a tell was answered twice";
}

TEST_F(EntityRegistryTest, FullMailboxRefusesWithOverload) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  for (int i = 0; i < 5; ++i) registry_.deliver(msg("a", 7), out_.callback());
  // One at the app, three queued, the fifth refused.
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kOverloaded);
}

TEST_F(EntityRegistryTest, TellsBeyondTheBacklogAreRefusedUntilTheAppAnswersOne) {
  EntityRegistryOptions o = options();
  o.maxPendingTells = 3;
  HeldHost host;
  EntityRegistry registry(host, scheduler_, o, Logger("test", LogLevel::kError));
  ASSERT_THAT(registry.assign({7}, 1), IsEmpty());
  const auto tell = [](const std::string& id) { return msg(id, 7, "t", DeliveryMode::kTell); };
  registry.deliver(tell("a"), out_.callback());
  registry.deliver(tell("b"), out_.callback());
  registry.deliver(tell("a"), out_.callback());  // waits in a's mailbox: it counts too
  registry.deliver(tell("c"), out_.callback());
  ASSERT_EQ(out_.got.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out_.got[i].response->status, 202) << i;
  EXPECT_EQ(out_.got[3].refusal, Refusal::kTellBacklog);
  EXPECT_EQ(registry.activeEntities(), 2u) << "a refused tell started an entity";
  registry.deliver(msg("c", 7), out_.callback());  // an ask is not held back by tells
  EXPECT_EQ(out_.got.size(), 4u) << "the ask was answered before the app answered it";
  ASSERT_EQ(host.deliveries.size(), 3u);  // a's first tell, b's tell, c's ask
  EXPECT_EQ(host.deliveries[2].message.key.id, "c");

  host.completeDelivery();  // a's first tell; a's second goes to the app, still pending
  registry.deliver(tell("d"), out_.callback());
  EXPECT_EQ(out_.got.back().response->status, 202);
  registry.deliver(tell("e"), out_.callback());
  EXPECT_EQ(out_.got.back().refusal, Refusal::kTellBacklog);
  host.completeDelivery(500);  // b's tell: an app error ends it as well
  registry.deliver(tell("e"), out_.callback());
  EXPECT_EQ(out_.got.back().response->status, 202);
  while (!host.deliveries.empty()) host.completeDelivery();
}

TEST_F(EntityRegistryTest, TellBytesBeyondTheBoundAreRefusedButOneLargeTellAloneIsTaken) {
  EntityRegistryOptions o = options();
  o.maxPendingTellBytes = 10;
  HeldHost host;
  EntityRegistry registry(host, scheduler_, o, Logger("test", LogLevel::kError));
  ASSERT_THAT(registry.assign({7}, 1), IsEmpty());
  registry.deliver(msg("a", 7, std::string(8, 'x'), DeliveryMode::kTell), out_.callback());
  registry.deliver(msg("b", 7, std::string(3, 'x'), DeliveryMode::kTell), out_.callback());
  EXPECT_EQ(out_.got.back().refusal, Refusal::kTellBacklog);
  registry.deliver(msg("b", 7, std::string(2, 'x'), DeliveryMode::kTell), out_.callback());
  EXPECT_FALSE(out_.got.back().refusal.has_value());
  host.completeDelivery();
  host.completeDelivery();
  registry.deliver(msg("c", 7, std::string(100, 'x'), DeliveryMode::kTell), out_.callback());
  EXPECT_FALSE(out_.got.back().refusal.has_value()) << "a tell over the bound, none waiting";
  registry.deliver(msg("d", 7, "x", DeliveryMode::kTell), out_.callback());
  EXPECT_EQ(out_.got.back().refusal, Refusal::kTellBacklog);
  host.completeDelivery();
}

// Every message goes out with a turn number, increasing over all entities; a stop names the
// entity's last one, so that the app can refuse a message that reaches it after the stop.
TEST_F(EntityRegistryTest, MessagesAreNumberedAndAStopNamesTheLastOne) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  registry_.deliver(msg("b", 7), out_.callback());
  ASSERT_EQ(host_.deliveries.size(), 2u);
  const std::uint64_t a1 = host_.deliveries[0].message.turn;
  const std::uint64_t b1 = host_.deliveries[1].message.turn;
  EXPECT_GT(a1, 0u);
  EXPECT_GT(b1, a1);
  host_.completeDelivery();
  registry_.deliver(msg("a", 7), out_.callback());
  ASSERT_EQ(host_.deliveries.size(), 2u);
  const std::uint64_t a2 = host_.deliveries[1].message.turn;
  EXPECT_GT(a2, b1);
  host_.completeDelivery();
  host_.completeDelivery();
  scheduler_.advance(seconds(60));
  ASSERT_EQ(host_.stops.size(), 2u);
  for (const auto& stop : host_.stops) {
    EXPECT_EQ(stop.lastTurn, stop.key.id == "a" ? a2 : b1) << stop.key.id;
  }
}

TEST_F(EntityRegistryTest, PassivatesAfterIdleTimeout) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(59));
  EXPECT_TRUE(host_.stops.empty());
  scheduler_.advance(seconds(1));
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(host_.stops[0].key.id, "a");
  EXPECT_EQ(registry_.activeEntities(), 1u) << "removed before the app confirmed the stop";
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  EXPECT_TRUE(registry_.owns(7));
}

TEST_F(EntityRegistryTest, ActiveEntitiesAreCountedByTypeAsTheyStartAndStop) {
  ASSERT_THAT(registry_.assign({7, 8}, 1), IsEmpty());
  const auto of = [](std::string type, std::string id, ShardId shard) {
    Message m = msg(std::move(id), shard);
    m.key.type = std::move(type);
    return m;
  };
  registry_.deliver(of("counter", "a", 7), out_.callback());
  registry_.deliver(of("counter", "b", 8), out_.callback());
  registry_.deliver(of("cart", "a", 7), out_.callback());
  registry_.deliver(of("counter", "a", 7), out_.callback());  // the same entity again
  EXPECT_THAT(registry_.activeEntitiesByType(), ElementsAre(Pair("cart", 1u), Pair("counter", 2u)));
  EXPECT_EQ(registry_.activeEntities("counter"), 2u);
  EXPECT_EQ(registry_.activeEntities("cart"), 1u);
  EXPECT_EQ(registry_.activeEntities("order"), 0u);
  while (!host_.deliveries.empty()) host_.completeDelivery();

  // Idle since the same instant: all three stop, counter/b first (its turn ended first).
  scheduler_.advance(seconds(60));
  ASSERT_EQ(host_.stops.size(), 3u);
  host_.completeStop();
  EXPECT_THAT(registry_.activeEntitiesByType(), ElementsAre(Pair("cart", 1u), Pair("counter", 1u)));
  host_.completeStop();
  host_.completeStop();
  EXPECT_THAT(registry_.activeEntitiesByType(), IsEmpty()) << "a type with no entity is listed";
  EXPECT_EQ(registry_.activeEntities("counter"), 0u);

  // A type that comes back is counted from one again.
  registry_.deliver(of("cart", "z", 8), out_.callback());
  EXPECT_THAT(registry_.activeEntitiesByType(), ElementsAre(Pair("cart", 1u)));
}

TEST_F(EntityRegistryTest, ActivityPostponesPassivation) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(30));
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(59));
  EXPECT_TRUE(host_.stops.empty()) << "stopped 59 s after its last message";
  scheduler_.advance(seconds(1));
  EXPECT_EQ(host_.stops.size(), 1u);
}

TEST_F(EntityRegistryTest, EntitiesPassivateInTheOrderTheyFellIdleEachAfterItsOwnTimeout) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  // a, b and c fall idle at 0 s, 10 s and 20 s; a is active again at 30 s.
  for (const char* id : {"a", "b", "c"}) {
    registry_.deliver(msg(id, 7), out_.callback());
    host_.completeDelivery();
    scheduler_.advance(seconds(10));
  }
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(39));  // 69 s
  EXPECT_TRUE(host_.stops.empty()) << "an entity was stopped before its 60 s";
  scheduler_.advance(seconds(1));  // 70 s
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(host_.stops[0].key.id, "b") << "b fell idle at 10 s";
  scheduler_.advance(seconds(9));  // 79 s
  ASSERT_EQ(host_.stops.size(), 1u) << "c was stopped before its 60 s";
  scheduler_.advance(seconds(1));  // 80 s
  ASSERT_EQ(host_.stops.size(), 2u);
  EXPECT_EQ(host_.stops[1].key.id, "c");
  scheduler_.advance(seconds(9));  // 89 s
  EXPECT_EQ(host_.stops.size(), 2u) << "a was stopped less than 60 s after its last message";
  scheduler_.advance(seconds(1));  // 90 s
  ASSERT_EQ(host_.stops.size(), 3u);
  EXPECT_EQ(host_.stops[2].key.id, "a");
}

TEST_F(EntityRegistryTest, ABusyEntityIsNotPassivatedWhateverItsAge) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(30));
  registry_.deliver(msg("a", 7), out_.callback());  // held at the app
  scheduler_.advance(seconds(120));
  EXPECT_TRUE(host_.stops.empty()) << "stopped while a message was at the app";
  host_.completeDelivery();
  scheduler_.advance(seconds(59));
  EXPECT_TRUE(host_.stops.empty());
  scheduler_.advance(seconds(1));
  EXPECT_EQ(host_.stops.size(), 1u);
}

TEST_F(EntityRegistryTest, ManyEntitiesDueTogetherAreAllPassivatedAFewStopsAtATime) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  constexpr int kEntities = 3000;  // more than one sweep stops at a time
  for (int i = 0; i < kEntities; ++i) {
    registry_.deliver(msg("e" + std::to_string(i), 7), out_.callback());
    host_.completeDelivery();
  }
  scheduler_.advance(seconds(60));
  // Each answered stop lets the next waiting one go, oldest first, never more than the bound.
  for (int i = 0; i < kEntities; ++i) {
    ASSERT_EQ(host_.stops.size(), std::min<std::size_t>(kMaxStops, kEntities - i)) << i;
    ASSERT_EQ(host_.stops.front().key.id, "e" + std::to_string(i));
    host_.completeStop();
  }
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, EntitiesFallingIdleOneAfterAnotherArePassivatedInBatches) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  // 100 entities fall idle 1 ms apart; with a 60 s timeout, sweeps come at most every 60/64 s.
  for (int i = 0; i < 100; ++i) {
    registry_.deliver(msg("e" + std::to_string(i), 7), out_.callback());
    host_.completeDelivery();
    scheduler_.advance(milliseconds(1));
  }
  scheduler_.advance(seconds(60) - milliseconds(100));  // 60 s after the first fell idle
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(scheduler_.pending(), 1u) << "more than one sweep is waiting";
  scheduler_.advance(milliseconds(900));
  EXPECT_EQ(host_.stops.size(), 1u) << "a sweep came sooner than 60/64 s after the last";
  scheduler_.advance(milliseconds(40));      // 60.94 s: the next sweep takes all that are due
  EXPECT_EQ(host_.stops.size(), kMaxStops);  // the rest wait for places at the app
  for (int i = 0; i < 100; ++i) host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u) << "the sweep at 60.94 s did not take every one due";
  EXPECT_EQ(scheduler_.pending(), 0u);
}

TEST_F(EntityRegistryTest, AShorterIdleTimeoutAppliesToEntitiesAlreadyIdle) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(5));
  registry_.setIdleTimeout(seconds(10));
  scheduler_.advance(seconds(4));
  EXPECT_TRUE(host_.stops.empty()) << "stopped after 9 s idle";
  scheduler_.advance(seconds(1));
  EXPECT_EQ(host_.stops.size(), 1u) << "not stopped after 10 s idle, the new timeout";
}

TEST_F(EntityRegistryTest, IdleTimeoutZeroTurnsPassivationOffAndBackOn) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  registry_.setIdleTimeout(seconds(0));
  scheduler_.advance(seconds(600));
  EXPECT_TRUE(host_.stops.empty()) << "passivated with passivation off";
  registry_.setIdleTimeout(seconds(60));
  scheduler_.runDue();
  EXPECT_EQ(host_.stops.size(), 1u) << "idle for 600 s, and not stopped once passivation is on";
}

TEST_F(EntityRegistryTest, AFailedPassivationIsTriedAgainAfterAnotherIdleTimeout) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(60));
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop(unavailable("app down"));
  EXPECT_EQ(registry_.activeEntities(), 1u);
  scheduler_.advance(seconds(59));
  EXPECT_TRUE(host_.stops.empty());
  scheduler_.advance(seconds(1));
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, MessageDuringPassivationRestartsTheEntityAfterTheStop) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7, "1"), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(seconds(60));
  ASSERT_EQ(host_.stops.size(), 1u);
  registry_.deliver(msg("a", 7, "2"), out_.callback());
  EXPECT_TRUE(host_.deliveries.empty()) << "delivered while the entity was stopping";
  host_.completeStop();
  ASSERT_EQ(host_.deliveries.size(), 1u);
  EXPECT_EQ(host_.deliveries[0].message.body, "2");
}

TEST_F(EntityRegistryTest, UnassignWaitsForInFlightMessages) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7, "1"), out_.callback());
  registry_.deliver(msg("a", 7, "2"), out_.callback());  // queued, accepted before the unassign
  std::optional<std::vector<ShardId>> released;
  registry_.unassign({7}, 2, seconds(30), [&](std::vector<ShardId> busy) { released = busy; });
  EXPECT_FALSE(released.has_value());
  EXPECT_FALSE(registry_.owns(7));

  registry_.deliver(msg("b", 7), out_.callback());  // new work for the shard is refused
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kNotOwned);

  host_.completeDelivery();  // "1"
  host_.completeDelivery();  // "2", accepted before the unassign, still delivered
  EXPECT_FALSE(released.has_value());
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  ASSERT_TRUE(released.has_value());
  EXPECT_THAT(*released, IsEmpty());
  EXPECT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, UnassignOfIdleShardReturnsAtOnce) {
  ASSERT_THAT(registry_.assign({7, 9}, 1), IsEmpty());
  std::optional<std::vector<ShardId>> released;
  registry_.unassign({7, 9, 11}, 2, seconds(30), [&](std::vector<ShardId> b) { released = b; });
  ASSERT_TRUE(released.has_value());
  EXPECT_THAT(*released, IsEmpty());
  EXPECT_THAT(registry_.ownedShards(), IsEmpty());
}

TEST_F(EntityRegistryTest, UnassignNamesShardsStillBusyAtTheDeadline) {
  ASSERT_THAT(registry_.assign({7, 8}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  std::optional<std::vector<ShardId>> released;
  registry_.unassign({7, 8}, 2, seconds(30), [&](std::vector<ShardId> b) { released = b; });
  scheduler_.advance(seconds(30));
  ASSERT_TRUE(released.has_value());
  EXPECT_THAT(*released, ElementsAre(7));
  // The handoff goes on in the background and the shard is released when the work ends.
  host_.completeDelivery();
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  EXPECT_FALSE(registry_.owns(7));
}

TEST_F(EntityRegistryTest, StopFailureDuringHandoffIsRetried) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  bool released = false;
  registry_.unassign({7}, 2, seconds(30), [&](std::vector<ShardId> b) { released = b.empty(); });
  host_.completeStop(unavailable("app restarting"));
  EXPECT_FALSE(released);
  EXPECT_TRUE(host_.stops.empty());
  scheduler_.advance(milliseconds(200));
  ASSERT_EQ(host_.stops.size(), 1u) << "the failed stop was not retried";
  host_.completeStop();
  EXPECT_TRUE(released);
}

TEST_F(EntityRegistryTest, StopsFailingDuringHandoffBackOffAndAreLoggedOncePerInterval) {
  std::vector<std::string> lines;
  HeldHost host;
  EntityRegistry registry(
      host, scheduler_, options(),
      Logger("test", LogLevel::kWarn, [&lines](std::string_view l) { lines.emplace_back(l); }));
  ASSERT_THAT(registry.assign({7}, 1), IsEmpty());
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back("e" + std::to_string(i));
  startIdle(registry, host, 7, ids);
  registry.unassign({7}, 2, seconds(300), [](std::vector<ShardId>) {});
  ASSERT_EQ(host.stops.size(), 10u);
  // The app is down: every stop fails. Each entity's retries come after 0.2, 0.4, 0.8, 1.6,
  // 3.2 s, then every 5 s.
  const std::vector<int> gapsMs = {200, 400, 800, 1600, 3200, 5000, 5000};
  for (std::size_t round = 0; round < gapsMs.size(); ++round) {
    while (!host.stops.empty()) host.completeStop(unavailable("connection refused"));
    scheduler_.advance(milliseconds(gapsMs[round] - 1));
    EXPECT_TRUE(host.stops.empty()) << "retried before " << gapsMs[round] << " ms";
    scheduler_.advance(milliseconds(1));
    EXPECT_EQ(host.stops.size(), 10u) << "not retried after " << gapsMs[round] << " ms";
  }
  // 70 failures, in rounds of 10 at 0, 0.2, 0.6, 1.4, 3.0, 6.2 and 11.2 s: a line for the first,
  // then one per 5 s at most (at 6.2 and 11.2 s), each counting the failures since the last
  // line; the 9 after the last line wait for the next.
  std::uint64_t failures = 0;
  for (const auto& l : lines) {
    ASSERT_NE(l.find("entity stop failed"), std::string::npos) << l;
    const auto at = l.find("\"failures\":");
    ASSERT_NE(at, std::string::npos) << l;
    failures += std::stoull(l.substr(at + 11));
  }
  EXPECT_EQ(lines.size(), 3u);
  EXPECT_EQ(failures, 70u - 9u) << "the lines do not account for the failures before the last";
  while (!host.stops.empty()) host.completeStop();  // the app is back
  EXPECT_EQ(registry.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, StaleAssignAfterUnassignIsRefused) {
  ASSERT_THAT(registry_.assign({7}, 5), IsEmpty());
  registry_.unassign({7}, 6, seconds(1), [](std::vector<ShardId>) {});
  // A copy of an earlier assign arriving late must not take the shard back.
  EXPECT_THAT(registry_.assign({7}, 5), ElementsAre(7));
  EXPECT_FALSE(registry_.owns(7));
  EXPECT_THAT(registry_.assign({7}, 6), IsEmpty());
  EXPECT_EQ(registry_.ownedEpoch(7), 6u);
}

TEST_F(EntityRegistryTest, AssignIsIdempotent) {
  ASSERT_THAT(registry_.assign({7, 8}, 5), IsEmpty());
  ASSERT_THAT(registry_.assign({7, 8}, 5), IsEmpty());
  EXPECT_THAT(registry_.ownedShards(), ElementsAre(7, 8));
  EXPECT_EQ(registry_.ownedEpoch(7), 5u);
}

TEST_F(EntityRegistryTest, RevokeReleasesOnlyAnOlderOwnership) {
  ASSERT_THAT(registry_.assign({7, 8}, 5), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  registry_.revokeIfOlder(8, 5);  // same epoch: the map still agrees with us
  EXPECT_TRUE(registry_.owns(8));
  registry_.revokeIfOlder(7, 9);
  EXPECT_FALSE(registry_.owns(7));
  host_.completeDelivery();
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  EXPECT_THAT(registry_.assign({7}, 8), ElementsAre(7)) << "revocation did not fence epoch 8";
}

TEST_F(EntityRegistryTest, DrainStopsEveryEntityAndRefusesNewOnes) {
  ASSERT_THAT(registry_.assign({7, 8}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  registry_.deliver(msg("b", 8), out_.callback());  // still at the app when the drain starts
  std::optional<bool> drained;
  registry_.drain(seconds(30), [&](bool complete) { drained = complete; });
  EXPECT_TRUE(registry_.draining());
  ASSERT_EQ(host_.stops.size(), 1u);  // "a" was idle
  registry_.deliver(msg("c", 7), out_.callback());
  EXPECT_EQ(out_.got.back().refusal, Refusal::kNotOwned);
  EXPECT_THAT(registry_.assign({9}, 2), ElementsAre(9)) << "a draining pod took a shard";
  host_.completeStop();
  EXPECT_FALSE(drained.has_value());
  host_.completeDelivery();  // "b" finishes, then stops
  host_.completeStop();
  ASSERT_TRUE(drained.has_value());
  EXPECT_TRUE(*drained);
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, DrainReportsIncompleteAtTheDeadline) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  std::optional<bool> drained;
  registry_.drain(seconds(5), [&](bool complete) { drained = complete; });
  scheduler_.advance(seconds(5));
  ASSERT_TRUE(drained.has_value());
  EXPECT_FALSE(*drained);
}

TEST_F(EntityRegistryTest, StopCallsBeyondTheBoundWaitAndAFailedOneFreesItsPlace) {
  HeldHost host;
  EntityRegistry registry(host, scheduler_, options(2), Logger("test", LogLevel::kError));
  ASSERT_THAT(registry.assign({7}, 1), IsEmpty());
  startIdle(registry, host, 7, {"a", "b", "c", "d"});
  scheduler_.advance(seconds(60));
  EXPECT_THAT(heldStops(host), ElementsAre("a", "b"));
  // A message for an entity whose stop waits is queued, not delivered, until the stop is done.
  registry.deliver(msg("c", 7, "late"), out_.callback());
  EXPECT_TRUE(host.deliveries.empty()) << "a message reached an entity that is being stopped";

  host.completeStop(unavailable("app busy"));  // "a" stays active; "c" takes its place
  EXPECT_THAT(heldStops(host), ElementsAre("b", "c"));
  host.completeStop();
  EXPECT_THAT(heldStops(host), ElementsAre("c", "d"));
  host.completeStop();  // "c" had a message waiting: it starts again
  ASSERT_EQ(host.deliveries.size(), 1u);
  EXPECT_EQ(host.deliveries[0].message.body, "late");
  host.completeDelivery();
  EXPECT_THAT(heldStops(host), ElementsAre("d"));
  host.completeStop();
  EXPECT_EQ(registry.activeEntities(), 2u);  // "a" (its stop failed) and "c" (restarted)
}

TEST_F(EntityRegistryTest, HandoffStopsGoBeforePassivationsThatWait) {
  HeldHost host;
  EntityRegistry registry(host, scheduler_, options(1), Logger("test", LogLevel::kError));
  ASSERT_THAT(registry.assign({7, 8, 9}, 1), IsEmpty());
  startIdle(registry, host, 7, {"p1"});
  startIdle(registry, host, 8, {"q1", "q2"});
  scheduler_.advance(seconds(60));  // all three passivate: p1 at the app, q1 and q2 wait
  EXPECT_THAT(heldStops(host), ElementsAre("p1"));
  startIdle(registry, host, 9, {"r1"});  // idle, not due

  std::vector<ShardId> released;
  auto record = [&](ShardId s) {
    return [&, s](std::vector<ShardId> busy) {
      EXPECT_THAT(busy, IsEmpty());
      released.push_back(s);
    };
  };
  registry.unassign({9}, 2, seconds(300), record(9));  // r1's stop waits, before q1 and q2
  registry.unassign({8}, 2, seconds(300), record(8));  // q1 and q2 now wait as a handoff's
  startIdle(registry, host, 7, {"p2"});
  scheduler_.advance(seconds(60));  // p2 passivates, after every handoff's stop
  EXPECT_THAT(heldStops(host), ElementsAre("p1"));

  std::vector<std::string> order;
  while (!host.stops.empty()) {
    order.push_back(host.stops.front().key.id);
    host.completeStop();
  }
  EXPECT_THAT(order, ElementsAre("p1", "r1", "q1", "q2", "p2"));
  EXPECT_THAT(released, ElementsAre(9, 8));
  EXPECT_EQ(registry.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, DrainOfMoreEntitiesThanTheBoundStopsThemAll) {
  HeldHost host;
  EntityRegistry registry(host, scheduler_, options(3), Logger("test", LogLevel::kError));
  ASSERT_THAT(registry.assign({7, 8}, 1), IsEmpty());
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back("e" + std::to_string(i));
  startIdle(registry, host, 7, ids);
  registry.deliver(msg("busy", 8), out_.callback());  // at the app when the drain starts
  std::optional<bool> drained;
  registry.drain(seconds(30), [&](bool complete) { drained = complete; });
  std::size_t stopped = 0;
  while (!host.stops.empty()) {
    EXPECT_LE(host.stops.size(), 3u);
    host.completeStop();
    ++stopped;
    if (stopped == 5) host.completeDelivery();  // "busy" finishes; its stop waits its turn
  }
  EXPECT_EQ(stopped, 11u);
  ASSERT_TRUE(drained.has_value());
  EXPECT_TRUE(*drained);
  EXPECT_EQ(registry.activeEntities(), 0u);
}

TEST_F(EntityRegistryTest, DestructionCancelsPendingTimers) {
  {
    HeldHost host;
    EntityRegistry registry(host, scheduler_, options(), Logger("test", LogLevel::kError));
    ASSERT_THAT(registry.assign({1}, 1), IsEmpty());
    registry.deliver(msg("a", 1), [](DeliveryOutcome) {});
    host.completeDelivery();
    EXPECT_GT(scheduler_.pending(), 0u);
  }
  EXPECT_EQ(scheduler_.pending(), 0u);
  scheduler_.advance(seconds(120));
}

// --- the ownership lease ----------------------------------------------------------------------

class EntityRegistryLeaseTest : public EntityRegistryTest {
 protected:
  EntityRegistryLeaseTest() {
    registry_.setLeaseDuration(seconds(30));  // fence lead: 7.5 s
    EXPECT_THAT(registry_.assign({7}, 1), IsEmpty());
  }
  SteadyTime now() { return scheduler_.clock().now(); }
};

TEST_F(EntityRegistryLeaseTest, NothingIsDeliveredBeforeTheFirstConfirmation) {
  registry_.deliver(msg("a", 7), out_.callback());
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kNotOwned);
  EXPECT_TRUE(host_.deliveries.empty());
  EXPECT_FALSE(registry_.leaseValid());
  registry_.renewLease(now());
  registry_.deliver(msg("a", 7), out_.callback());
  EXPECT_EQ(host_.deliveries.size(), 1u);
  EXPECT_TRUE(registry_.leaseValid());
}

TEST_F(EntityRegistryLeaseTest, AnUnrenewedLeaseStopsEveryEntityBeforeItRunsOut) {
  registry_.renewLease(now());
  startIdle(registry_, host_, 7, {"a", "b"});
  registry_.deliver(msg("c", 7), out_.callback());  // at the app when the fence comes
  scheduler_.advance(seconds(22));
  EXPECT_TRUE(host_.stops.empty()) << "stopped before the fence";
  scheduler_.advance(seconds(1));  // 23 s: past the fence (30 s - a quarter)
  EXPECT_FALSE(registry_.leaseValid());
  EXPECT_THAT(heldStops(host_), UnorderedElementsAre("a", "b"));
  registry_.deliver(msg("d", 7), out_.callback());
  EXPECT_EQ(out_.got.back().refusal, Refusal::kNotOwned) << "a new message was taken";
  host_.completeDelivery();  // c's turn ends: it stops too
  EXPECT_THAT(heldStops(host_), UnorderedElementsAre("a", "b", "c"));
  while (!host_.stops.empty()) host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  EXPECT_EQ(registry_.ownedShards(), std::vector<ShardId>{7}) << "the shard itself stays owned";
}

TEST_F(EntityRegistryLeaseTest, QueuedMessagesDoNotReachTheAppOnceTheLeaseRanOut) {
  registry_.renewLease(now());
  registry_.deliver(msg("a", 7, "1"), out_.callback());
  registry_.deliver(msg("a", 7, "2"), out_.callback());
  registry_.deliver(msg("a", 7, "3", DeliveryMode::kTell), out_.callback());
  ASSERT_EQ(host_.deliveries.size(), 1u);
  ASSERT_EQ(out_.got.size(), 1u);  // the tell's 202
  scheduler_.advance(seconds(31));  // past the lease's end, the first message still at the app
  host_.completeDelivery();
  EXPECT_TRUE(host_.deliveries.empty()) << "a queued message reached the app after the lease";
  ASSERT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(out_.got[1].response->body, "1");
  EXPECT_EQ(out_.got[2].refusal, Refusal::kNotOwned) << "the queued ask was not refused";
  EXPECT_TRUE(host_.stops.empty()) << "a stop reached the app after the lease ran out";
}

TEST_F(EntityRegistryLeaseTest, ARenewalLiftsTheFence) {
  registry_.renewLease(now());
  scheduler_.advance(seconds(26));
  EXPECT_FALSE(registry_.leaseValid());
  registry_.renewLease(now());
  EXPECT_TRUE(registry_.leaseValid());
  registry_.deliver(msg("a", 7), out_.callback());
  EXPECT_EQ(host_.deliveries.size(), 1u);
  // The timer of the first lease's fence does not fence the renewed one.
  scheduler_.advance(seconds(10));
  EXPECT_TRUE(registry_.leaseValid());
}

TEST_F(EntityRegistryLeaseTest, AConfirmationCountsFromWhenItsRequestWasSent) {
  const SteadyTime sent = now();
  scheduler_.advance(seconds(28));  // the answer came late (a slow network, a frozen process)
  registry_.renewLease(sent);
  EXPECT_FALSE(registry_.leaseValid()) << "a late answer extended the lease from its arrival";
  registry_.deliver(msg("a", 7), out_.callback());
  EXPECT_EQ(out_.got.back().refusal, Refusal::kNotOwned);
  registry_.renewLease(sent - seconds(1));  // an older confirmation changes nothing
  EXPECT_FALSE(registry_.leaseValid());
}

TEST_F(EntityRegistryLeaseTest, FailedStopsUnderTheFenceAreRetriedWithBackoff) {
  registry_.renewLease(now());
  startIdle(registry_, host_, 7, {"a"});
  scheduler_.advance(seconds(25));
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop(unavailable("app down"));
  EXPECT_TRUE(host_.stops.empty()) << "retried at once";
  scheduler_.advance(milliseconds(200));
  ASSERT_EQ(host_.stops.size(), 1u) << "not retried after the backoff";
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

// Stops that wait for one of the --max-concurrent-stops places, or that failed and are retried,
// are not sent once the lease has run out: another pod may run those entities by then.
TEST(EntityRegistryLease, NoStopReachesTheAppAfterTheLeaseRanOut) {
  HeldHost host;
  ManualScheduler scheduler;
  EntityRegistryOptions o;
  o.idleTimeout = seconds(60);
  o.maxConcurrentStops = 4;
  EntityRegistry registry(host, scheduler, o, Logger("test", LogLevel::kError));
  registry.setLeaseDuration(seconds(10));  // fence at 7.5 s, end at 10 s
  ASSERT_THAT(registry.assign({7}, 1), IsEmpty());
  registry.renewLease(scheduler.clock().now());
  Outcomes out;
  for (int i = 0; i < 40; ++i) {
    registry.deliver(msg("e" + std::to_string(i), 7), out.callback());
    host.completeDelivery();
  }
  scheduler.advance(milliseconds(7600));
  ASSERT_EQ(host.stops.size(), 4u);
  int sentAfterEnd = 0;
  while (!host.stops.empty()) {
    scheduler.advance(milliseconds(600));  // each batch of saves takes 600 ms at the app
    const bool ended = scheduler.clock().now() >= SteadyTime{} + seconds(10);
    const std::size_t batch = host.stops.size();
    for (std::size_t i = 0; i < batch; ++i) host.completeStop();
    if (ended) sentAfterEnd += static_cast<int>(host.stops.size());
  }
  EXPECT_EQ(sentAfterEnd, 0) << "stops reached the app after the lease had run out";
  EXPECT_GT(registry.activeEntities(), 0u) << "every stop fitted in the fence: nothing was tested";
  // Renewed, the entities that were not stopped serve again.
  registry.renewLease(scheduler.clock().now());
  scheduler.advance(seconds(6));
  registry.deliver(msg("e39", 7), out.callback());
  EXPECT_EQ(host.deliveries.size(), 1u);
}

TEST_F(EntityRegistryLeaseTest, UndrainTakesEntitiesAgain) {
  registry_.renewLease(now());
  std::optional<bool> drained;
  registry_.drain(seconds(30), [&](bool complete) { drained = complete; });
  ASSERT_EQ(drained, true);
  EXPECT_THAT(registry_.assign({8}, 2), ElementsAre(8)) << "a draining pod took a shard";
  registry_.undrain();
  EXPECT_THAT(registry_.assign({7, 8}, 2), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  EXPECT_EQ(host_.deliveries.size(), 1u);
}

}  // namespace
}  // namespace kshard::sidecar
