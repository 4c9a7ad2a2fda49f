// The active-entity limit of EntityRegistry (sidecar/entity_registry_limit.cc): at most N
// entities at the app at once, least recently used idle ones passivated first, new ones waiting
// in arrival order, and waiting messages refused without loss when the shard or the pod goes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "sidecar/entity_registry.h"
#include "tests/sidecar/held_host.h"

namespace kshard::sidecar {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A HeldHost that knows which entities are active at the app: from their first message until
// their stop call has returned OK. It records the most ever active at once.
class CountingHost : public testing::HeldHost {
 public:
  void deliver(Message message, Epoch epoch,
               UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    if (stopping.count(message.key.id))
      violations.push_back(message.key.id + " got a message while stopping");
    active.insert(message.key.id);
    most = std::max(most, active.size());
    HeldHost::deliver(std::move(message), epoch, std::move(done));
  }
  void start(const EntityKey& key, ShardId shard, Epoch epoch, std::uint64_t turn,
             StartCallback done) override {
    active.insert(key.id);
    most = std::max(most, active.size());
    HeldHost::start(key, shard, epoch, turn, std::move(done));
  }
  void stop(const EntityKey& key, ShardId shard, std::uint64_t lastTurn,
            std::function<void(Status)> done) override {
    stopping.insert(key.id);
    HeldHost::stop(key, shard, lastTurn, std::move(done));
  }
  // Answers the oldest held stop; an entity stopped OK leaves the app.
  void finishStop(Status st = {}) {
    ASSERT_FALSE(stops.empty());
    const std::string id = stops.front().key.id;
    stopping.erase(id);
    if (st.ok()) active.erase(id);
    completeStop(std::move(st));
  }

  std::set<std::string> active;
  std::set<std::string> stopping;
  std::size_t most = 0;
  std::vector<std::string> violations;
};

struct Outcomes {
  std::vector<std::pair<std::string, DeliveryOutcome>> got;
  EntityRegistry::DeliveryCallback callback(std::string id) {
    return [this, id](DeliveryOutcome o) { got.emplace_back(id, std::move(o)); };
  }
  // The outcomes of `id`, in order: "200:<body>", "202", or the refusal's number.
  std::vector<std::string> of(const std::string& id) const {
    std::vector<std::string> out;
    for (const auto& [who, o] : got) {
      if (who != id) continue;
      if (o.refusal) {
        out.push_back("refused:" + std::to_string(static_cast<int>(*o.refusal)));
      } else if (o.response->status == 202) {
        out.push_back("202");
      } else {
        out.push_back(std::to_string(o.response->status) + ":" + o.response->body);
      }
    }
    return out;
  }
};

const std::string kNotOwned = "refused:" + std::to_string(static_cast<int>(Refusal::kNotOwned));

using testing::msg;
using testing::tell;

class EntityRegistryLimitTest : public ::testing::Test {
 protected:
  // A registry with an active-entity limit of `limit`, owning shards 7 and 8.
  std::unique_ptr<EntityRegistry> make(std::size_t limit, std::size_t maxMailbox = 100,
                                       std::size_t maxConcurrentStops = 64) {
    EntityRegistryOptions o;
    o.idleTimeout = seconds(60);
    o.maxMailbox = maxMailbox;
    o.maxConcurrentStops = maxConcurrentStops;
    o.maxActiveEntities = limit;
    o.onLimitPassivation = [this] { ++limitPassivations_; };
    auto r =
        std::make_unique<EntityRegistry>(host_, scheduler_, o, Logger("test", LogLevel::kError));
    EXPECT_THAT(r->assign({7, 8}, 1), IsEmpty());
    return r;
  }
  // One message to each entity, answered: they are active and idle, the first least recent.
  void startIdle(EntityRegistry& registry, const std::vector<std::string>& ids, ShardId shard = 7) {
    for (const auto& id : ids) {
      registry.deliver(msg(id, shard, id), out_.callback(id));
      host_.completeDelivery();
      scheduler_.advance(milliseconds(1));
    }
  }
  std::vector<std::string> heldStops() const {
    std::vector<std::string> ids;
    for (const auto& s : host_.stops) ids.push_back(s.key.id);
    return ids;
  }
  std::vector<std::string> heldDeliveries() const {
    std::vector<std::string> ids;
    for (const auto& d : host_.deliveries) ids.push_back(d.message.key.id);
    return ids;
  }

  CountingHost host_;
  ManualScheduler scheduler_;
  Outcomes out_;
  int limitPassivations_ = 0;
};

TEST_F(EntityRegistryLimitTest, AFloodOfNewEntitiesNeverHasMoreThanTheLimitAtTheApp) {
  auto registry = make(3);
  std::mt19937 rng(5);
  constexpr int kEntities = 40;
  for (int i = 0; i < kEntities; ++i) {
    const std::string id = "e" + std::to_string(i);
    registry->deliver(msg(id, 7 + i % 2, id), out_.callback(id));
  }
  EXPECT_EQ(registry->activeEntities(), 3u);
  EXPECT_EQ(registry->waitingEntities(), static_cast<std::size_t>(kEntities - 3));
  // The app answers messages and stops in a shuffled order until every message is answered.
  while (!host_.deliveries.empty() || !host_.stops.empty()) {
    const bool answerStop = host_.deliveries.empty() || (!host_.stops.empty() && rng() % 2);
    if (answerStop) {
      host_.finishStop();
    } else {
      std::swap(host_.deliveries.front(), host_.deliveries[rng() % host_.deliveries.size()]);
      host_.completeDelivery();
    }
    ASSERT_LE(registry->activeEntities(), 3u);
  }
  EXPECT_LE(host_.most, 3u) << "more entities than the limit were active at the app at once";
  EXPECT_THAT(host_.violations, IsEmpty());
  for (int i = 0; i < kEntities; ++i) {
    const std::string id = "e" + std::to_string(i);
    EXPECT_THAT(out_.of(id), ElementsAre("200:" + id)) << id;
  }
  EXPECT_EQ(registry->waitingEntities(), 0u);
  EXPECT_EQ(limitPassivations_, kEntities - 3);
}

TEST_F(EntityRegistryLimitTest, TheLeastRecentlyUsedIdleEntityIsPassivatedFirst) {
  auto registry = make(3);
  startIdle(*registry, {"a", "b", "c"});
  startIdle(*registry, {"a"});  // a is used again: b is now the least recently used
  registry->deliver(msg("d", 7), out_.callback("d"));
  EXPECT_THAT(heldStops(), ElementsAre("b"));
  EXPECT_TRUE(host_.deliveries.empty()) << "d reached the app before b's stop returned";
  registry->deliver(msg("e", 8), out_.callback("e"));
  EXPECT_THAT(heldStops(), ElementsAre("b", "c"));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("d")) << "the first to wait is the first admitted";
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("d", "e"));
  EXPECT_EQ(limitPassivations_, 2);
  EXPECT_EQ(host_.most, 3u);
}

TEST_F(EntityRegistryLimitTest, PinnedEntitiesAreNeverPassivated) {
  auto registry = make(2);
  startIdle(*registry, {"a", "b"});
  EXPECT_TRUE(registry->keepActive({"counter", "a"}, 7));  // active already: pinned, no start
  EXPECT_TRUE(host_.starts.empty());
  registry->deliver(msg("c", 7), out_.callback("c"));
  EXPECT_THAT(heldStops(), ElementsAre("b")) << "the pinned least recently used one was stopped";
  host_.finishStop();
  host_.completeDelivery();  // c
  // Only pinned a and idle c: d waits for c; e waits with nothing left to stop but a.
  registry->deliver(msg("d", 7), out_.callback("d"));
  registry->deliver(msg("e", 7), out_.callback("e"));
  EXPECT_THAT(heldStops(), ElementsAre("c"));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("d"));
  scheduler_.advance(seconds(120));  // nor is a pinned entity passivated for idleness
  EXPECT_THAT(heldStops(), IsEmpty());
  EXPECT_EQ(registry->waitingEntities(), 1u);
  // Unpinned, it is the only idle entity: e gets its place.
  registry->unpin({"counter", "a"}, false);
  EXPECT_THAT(heldStops(), ElementsAre("a"));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("d", "e"));
  EXPECT_LE(host_.most, 2u);
}

TEST_F(EntityRegistryLimitTest, AKeptActiveEntityWaitsForAPlaceThenStartsPinned) {
  auto registry = make(2);
  startIdle(*registry, {"a", "b"});
  const EntityKey singleton{"counter", "s"};
  EXPECT_TRUE(registry->keepActive(singleton, 7));
  EXPECT_TRUE(host_.starts.empty()) << "started beyond the limit";
  EXPECT_FALSE(registry->pinned(singleton)) << "not active yet";
  registry->deliver(msg("s", 7, "m"), out_.callback("s"));  // waits behind its start
  EXPECT_THAT(heldStops(), ElementsAre("a"));
  host_.finishStop();
  ASSERT_EQ(host_.starts.size(), 1u);
  EXPECT_EQ(host_.starts.front().key.id, "s");
  EXPECT_TRUE(host_.deliveries.empty()) << "a message went before the start turn";
  host_.completeStart();
  EXPECT_THAT(heldDeliveries(), ElementsAre("s"));
  host_.completeDelivery();
  EXPECT_TRUE(registry->pinned(singleton));
  // s is pinned: the next new entity takes b's place, not s's.
  registry->deliver(msg("c", 7), out_.callback("c"));
  EXPECT_THAT(heldStops(), ElementsAre("b"));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("c"));
  EXPECT_LE(host_.most, 2u);
}

// A message that reaches a singleton before its keeper did, while the limit is reached, waits;
// once admitted, the singleton gets its start turn before the message, as without a limit.
TEST_F(EntityRegistryLimitTest, ASingletonAdmittedFromTheWaitIsStartedBeforeItsMessage) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  Message m = msg("leader", 7, "m");
  m.key.type = std::string(kSingletonEntityType);
  registry->deliver(std::move(m), out_.callback("leader"));
  EXPECT_THAT(heldStops(), ElementsAre("a"));
  host_.finishStop();
  ASSERT_EQ(host_.starts.size(), 1u) << "the singleton was admitted without its start turn";
  EXPECT_EQ(host_.starts.front().key.id, "leader");
  EXPECT_TRUE(host_.deliveries.empty()) << "its message went before the start turn";
  host_.completeStart();
  EXPECT_THAT(heldDeliveries(), ElementsAre("leader"));
}

TEST_F(EntityRegistryLimitTest, AnEntityNoLongerKeptWhileItWaitsIsDropped) {
  auto registry = make(1);
  registry->deliver(msg("a", 7), out_.callback("a"));  // at the app
  EXPECT_TRUE(registry->keepActive({"counter", "s"}, 7));
  EXPECT_EQ(registry->waitingEntities(), 1u);
  registry->unpin({"counter", "s"}, true);
  EXPECT_EQ(registry->waitingEntities(), 0u);
  host_.completeDelivery();
  EXPECT_THAT(heldStops(), IsEmpty()) << "a was stopped for nothing";
}

TEST_F(EntityRegistryLimitTest, ABusyEntityIsPassivatedOnlyOnceItsTurnEnds) {
  auto registry = make(1);
  registry->deliver(msg("a", 7, "1"), out_.callback("a"));
  registry->deliver(msg("b", 7, "2"), out_.callback("b"));
  EXPECT_THAT(heldStops(), IsEmpty()) << "a was stopped while its message was at the app";
  EXPECT_THAT(heldDeliveries(), ElementsAre("a"));
  host_.completeDelivery();
  EXPECT_THAT(heldStops(), ElementsAre("a"));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("b"));
  host_.completeDelivery();
  EXPECT_THAT(out_.of("b"), ElementsAre("200:2"));
  EXPECT_EQ(host_.most, 1u);
}

TEST_F(EntityRegistryLimitTest, MessagesOfAWaitingEntityReachItInOrderOnceAdmitted) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  registry->deliver(msg("b", 7, "1"), out_.callback("b"));
  registry->deliver(tell("b", 7, "2"), out_.callback("b"));
  registry->deliver(msg("b", 7, "3"), out_.callback("b"));
  EXPECT_EQ(registry->waitingEntities(), 1u) << "one entity waits, with three messages";
  EXPECT_THAT(heldStops(), ElementsAre("a")) << "one place is enough for one waiting entity";
  host_.finishStop();
  for (const char* body : {"1", "2", "3"}) {
    ASSERT_EQ(host_.deliveries.size(), 1u);
    EXPECT_EQ(host_.deliveries.front().message.body, body);
    host_.completeDelivery();
  }
  EXPECT_THAT(out_.of("b"), ElementsAre("202", "200:1", "200:3"));
}

TEST_F(EntityRegistryLimitTest, AWaitingTellIsAcknowledgedOnlyOnceItsEntityIsAdmitted) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  registry->deliver(tell("b", 7), out_.callback("b"));
  EXPECT_THAT(out_.of("b"), IsEmpty()) << "a tell was acknowledged while its entity waited";
  host_.finishStop();
  EXPECT_THAT(out_.of("b"), ElementsAre("202"));
  EXPECT_THAT(heldDeliveries(), ElementsAre("b"));
  host_.completeDelivery();
  EXPECT_THAT(out_.of("b"), ElementsAre("202"));
}

TEST_F(EntityRegistryLimitTest, AHandoffRefusesTheWaitingMessagesOfItsShardsOnly) {
  auto registry = make(1);
  registry->deliver(msg("a", 7), out_.callback("a"));  // at the app: no place frees yet
  registry->deliver(msg("b", 8), out_.callback("b"));
  registry->deliver(tell("c", 8), out_.callback("c"));
  registry->deliver(msg("d", 7), out_.callback("d"));
  EXPECT_EQ(registry->waitingEntities(), 3u);
  std::optional<std::vector<ShardId>> released;
  registry->unassign({8}, 2, seconds(30), [&](std::vector<ShardId> busy) { released = busy; });
  EXPECT_THAT(out_.of("b"), ElementsAre(kNotOwned)) << "the sender retries at the next owner";
  EXPECT_THAT(out_.of("c"), ElementsAre(kNotOwned)) << "an unacknowledged tell is refused too";
  ASSERT_TRUE(released.has_value()) << "waiting entities held up their shard's release";
  EXPECT_THAT(*released, IsEmpty());
  EXPECT_EQ(registry->waitingEntities(), 1u);
  host_.completeDelivery();  // a: stopped for d
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("d"));
  EXPECT_THAT(host_.violations, IsEmpty());
  for (const auto& d : host_.deliveries) EXPECT_NE(d.message.shard, 8);
}

TEST_F(EntityRegistryLimitTest, AnEntityAdmittedBeforeItsShardHandsOffFinishesThenStops) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  registry->deliver(tell("b", 7, "kept"), out_.callback("b"));
  host_.finishStop();  // b is admitted: its tell acknowledged, its turn at the app
  EXPECT_THAT(out_.of("b"), ElementsAre("202"));
  registry->deliver(tell("b", 7, "queued"), out_.callback("b"));  // acknowledged, in b's mailbox
  std::optional<std::vector<ShardId>> released;
  registry->unassign({7}, 2, seconds(30), [&](std::vector<ShardId> busy) { released = busy; });
  EXPECT_FALSE(released.has_value());
  host_.completeDelivery();
  ASSERT_THAT(heldDeliveries(), ElementsAre("b")) << "an acknowledged tell was not delivered";
  EXPECT_EQ(host_.deliveries.front().message.body, "queued");
  host_.completeDelivery();
  EXPECT_THAT(heldStops(), ElementsAre("b"));
  host_.finishStop();
  ASSERT_TRUE(released.has_value());
  EXPECT_THAT(*released, IsEmpty());
}

TEST_F(EntityRegistryLimitTest, TheDrainRefusesEveryWaitingMessage) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  registry->deliver(msg("b", 7), out_.callback("b"));
  registry->deliver(tell("c", 8), out_.callback("c"));
  std::optional<bool> drained;
  registry->drain(seconds(30), [&](bool complete) { drained = complete; });
  EXPECT_THAT(out_.of("b"), ElementsAre(kNotOwned));
  EXPECT_THAT(out_.of("c"), ElementsAre(kNotOwned));
  EXPECT_EQ(registry->waitingEntities(), 0u);
  host_.finishStop();  // a: its passivation for b became the drain's stop
  EXPECT_EQ(drained, true);
  EXPECT_THAT(heldDeliveries(), IsEmpty()) << "a refused entity reached the app";
}

TEST_F(EntityRegistryLimitTest, TheLeaseFenceRefusesEveryWaitingMessage) {
  auto registry = make(1);
  registry->setLeaseDuration(seconds(30));  // fence at 22.5 s
  registry->renewLease(scheduler_.clock().now());
  registry->deliver(msg("a", 7), out_.callback("a"));  // at the app
  registry->deliver(msg("b", 7), out_.callback("b"));
  registry->deliver(tell("c", 8), out_.callback("c"));
  scheduler_.advance(seconds(23));
  EXPECT_THAT(out_.of("b"), ElementsAre(kNotOwned));
  EXPECT_THAT(out_.of("c"), ElementsAre(kNotOwned));
  host_.completeDelivery();  // a's turn ends: it stops, and nobody takes its place
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), IsEmpty());
  EXPECT_EQ(registry->activeEntities(), 0u);
}

TEST_F(EntityRegistryLimitTest, AStopThatFailsStillCountsAndIsRetriedAfterABackoff) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  registry->deliver(msg("b", 7), out_.callback("b"));
  host_.finishStop(unavailable("app busy"));
  EXPECT_THAT(heldDeliveries(), IsEmpty()) << "b was admitted while a's stop had failed";
  EXPECT_THAT(heldStops(), IsEmpty()) << "stopped again at once";
  scheduler_.advance(milliseconds(199));
  EXPECT_THAT(heldStops(), IsEmpty());
  scheduler_.advance(milliseconds(1));
  EXPECT_THAT(heldStops(), ElementsAre("a")) << "not tried again after stopRetryDelay";
  host_.finishStop(unavailable("app busy"));
  scheduler_.advance(milliseconds(399));
  EXPECT_THAT(heldStops(), IsEmpty()) << "the second retry did not back off";
  scheduler_.advance(milliseconds(1));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("b"));
  EXPECT_EQ(host_.most, 1u);
}

TEST_F(EntityRegistryLimitTest, AnEntityMessagedWhileStoppingKeepsItsPlaceAndIsStoppedAgain) {
  auto registry = make(1);
  startIdle(*registry, {"a"});
  registry->deliver(msg("b", 7), out_.callback("b"));
  registry->deliver(msg("a", 7, "again"), out_.callback("a"));  // a's stop is at the app
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("a")) << "a's message was accepted before b waited";
  host_.completeDelivery();
  EXPECT_THAT(heldStops(), ElementsAre("a"));
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("b"));
  EXPECT_EQ(host_.most, 1u);
}

TEST_F(EntityRegistryLimitTest, ALowerLimitPassivatesDownToItAndAHigherOneAdmitsWaiters) {
  auto registry = make(4);
  startIdle(*registry, {"a", "b", "c", "d"});
  registry->setMaxActiveEntities(2);
  EXPECT_THAT(heldStops(), ElementsAre("a", "b"));
  registry->deliver(msg("e", 7), out_.callback("e"));
  EXPECT_THAT(heldStops(), ElementsAre("a", "b", "c")) << "e needs a place of its own";
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), IsEmpty()) << "admitted with 3 active under a limit of 2";
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), IsEmpty());
  host_.finishStop();
  EXPECT_THAT(heldDeliveries(), ElementsAre("e"));
  host_.completeDelivery();
  EXPECT_LE(host_.active.size(), 2u);

  registry->deliver(msg("f", 7), out_.callback("f"));
  registry->deliver(msg("g", 7), out_.callback("g"));
  EXPECT_THAT(heldStops(), ElementsAre("d", "e"));
  registry->setMaxActiveEntities(4);  // both admitted now; the stops go on
  EXPECT_THAT(heldDeliveries(), ElementsAre("f", "g"));
  EXPECT_EQ(host_.active.size(), 4u);
  while (!host_.stops.empty()) host_.finishStop();
  registry->setMaxActiveEntities(0);  // no limit
  for (const char* id : {"h", "i", "j"}) registry->deliver(msg(id, 7), out_.callback(id));
  EXPECT_EQ(host_.deliveries.size(), 5u);
  EXPECT_THAT(heldStops(), IsEmpty());
}

TEST_F(EntityRegistryLimitTest, NoLimitLeavesEveryNewEntityToTheApp) {
  auto registry = make(0);
  for (int i = 0; i < 50; ++i) {
    registry->deliver(msg("e" + std::to_string(i), 7), out_.callback("x"));
  }
  EXPECT_EQ(host_.deliveries.size(), 50u);
  EXPECT_EQ(registry->waitingEntities(), 0u);
}

TEST_F(EntityRegistryLimitTest, WaitingMessagesBeyondTheMailboxBoundAreAnOverload) {
  auto registry = make(1, 3);
  registry->deliver(msg("a", 7), out_.callback("a"));  // at the app
  registry->deliver(msg("b", 7), out_.callback("b"));
  registry->deliver(msg("c", 7), out_.callback("c"));
  registry->deliver(msg("b", 7), out_.callback("b"));
  registry->deliver(msg("d", 7), out_.callback("d"));
  ASSERT_THAT(out_.of("d"),
              ElementsAre("refused:" + std::to_string(static_cast<int>(Refusal::kEntityLimit))));
  EXPECT_TRUE(isOverload(out_.got.back().second.refusal)) << "a sender would retry it";
  EXPECT_NE(overloadMessage(Refusal::kEntityLimit).find("maxActiveEntitiesPerPod"),
            std::string::npos);
  EXPECT_EQ(registry->waitingEntities(), 2u);
  registry->deliver(msg("a", 7), out_.callback("a"));  // an active entity's mailbox is its own
  EXPECT_EQ(out_.of("a").size(), 0u);
  host_.completeDelivery();
  host_.completeDelivery();  // a's two messages; then it stops for b
  host_.finishStop();
  registry->deliver(msg("d", 7), out_.callback("d"));  // room again among the waiting
  EXPECT_EQ(out_.of("d").size(), 1u);
  EXPECT_EQ(registry->waitingEntities(), 2u);
}

TEST_F(EntityRegistryLimitTest, WaitingTellsCountInTheTellBacklog) {
  EntityRegistryOptions o;
  o.maxActiveEntities = 1;
  o.maxPendingTells = 2;
  auto registry =
      std::make_unique<EntityRegistry>(host_, scheduler_, o, Logger("test", LogLevel::kError));
  ASSERT_THAT(registry->assign({7}, 1), IsEmpty());
  registry->deliver(msg("a", 7), out_.callback("a"));
  registry->deliver(tell("b", 7), out_.callback("b"));
  registry->deliver(tell("c", 7), out_.callback("c"));
  registry->deliver(tell("d", 7), out_.callback("d"));
  EXPECT_THAT(out_.of("d"),
              ElementsAre("refused:" + std::to_string(static_cast<int>(Refusal::kTellBacklog))));
  // Refused waiting tells leave the backlog.
  registry->unassign({7}, 2, seconds(30), [](std::vector<ShardId>) {});
  ASSERT_THAT(registry->assign({8}, 3), IsEmpty());
  host_.completeDelivery();
  host_.finishStop();
  registry->deliver(tell("e", 8), out_.callback("e"));
  registry->deliver(tell("f", 8), out_.callback("f"));
  EXPECT_THAT(out_.of("e"), ElementsAre("202"));
  EXPECT_THAT(out_.of("f"), IsEmpty()) << "waits for a place, not refused for the backlog";
}

TEST_F(EntityRegistryLimitTest, ALimitOfOneRunsOneEntityAtATimeThroughAllOfThem) {
  auto registry = make(1, 1000, 1);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      const std::string id = "e" + std::to_string(i);
      registry->deliver(msg(id, 7 + i % 2, id), out_.callback(id));
    }
  }
  while (!host_.deliveries.empty() || !host_.stops.empty()) {
    if (!host_.deliveries.empty()) {
      host_.completeDelivery();
    } else {
      host_.finishStop();
    }
    ASSERT_LE(host_.active.size(), 1u);
  }
  for (int i = 0; i < 10; ++i) {
    const std::string id = "e" + std::to_string(i);
    EXPECT_THAT(out_.of(id), ElementsAre("200:" + id, "200:" + id, "200:" + id)) << id;
  }
  EXPECT_EQ(host_.most, 1u);
  EXPECT_THAT(host_.violations, IsEmpty());
}

TEST_F(EntityRegistryLimitTest, IdlePassivationStillWorksUnderTheLimit) {
  auto registry = make(5);
  startIdle(*registry, {"a", "b"});
  scheduler_.advance(seconds(61));
  EXPECT_THAT(heldStops(), ElementsAre("a", "b"));
  while (!host_.stops.empty()) host_.finishStop();
  EXPECT_EQ(registry->activeEntities(), 0u);
  EXPECT_EQ(limitPassivations_, 0) << "an idle passivation was counted as the limit's";
}

}  // namespace
}  // namespace kshard::sidecar
