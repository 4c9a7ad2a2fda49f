// Entities that run without a message (sidecar/entity_registry_pinned.cc): keepActive and its
// start turns, pinned entities, the shards-taken listeners, the recorder of remembered entities
// and the passivation an app asks for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <set>

#include "sidecar/entity_recorder.h"
#include "sidecar/entity_registry.h"
#include "tests/sidecar/held_host.h"

namespace kshard::sidecar {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

using testing::HeldHost;

// A recorder whose calls are held until the test answers them.
class HeldRecorder final : public EntityRecorder {
 public:
  struct Call {
    EntityKey key;
    ShardId shard;
    Epoch epoch;
    std::function<void(Status)> done;
  };
  bool remembered(const std::string& type) override { return types.count(type) > 0; }
  void started(const EntityKey& key, ShardId shard, Epoch epoch,
               std::function<void(Status)> done) override {
    starts.push_back({key, shard, epoch, std::move(done)});
  }
  void forgotten(const EntityKey& key, ShardId shard, Epoch epoch,
                 std::function<void(Status)> done) override {
    forgets.push_back({key, shard, epoch, std::move(done)});
  }
  static void complete(std::deque<Call>& calls, Status st = {}) {
    ASSERT_FALSE(calls.empty()) << "no recorder call is held";
    Call c = std::move(calls.front());
    calls.pop_front();
    c.done(std::move(st));
  }

  std::set<std::string> types{"counter"};
  std::deque<Call> starts;
  std::deque<Call> forgets;
};

using testing::msg;
using testing::Outcomes;
using testing::tell;

const EntityKey kTicker{std::string(kSingletonEntityType), "ticker"};
const EntityKey kA{"counter", "a"};

class PinnedEntityTest : public ::testing::Test {
 protected:
  PinnedEntityTest() : registry_(host_, scheduler_, options(), Logger("test", LogLevel::kError)) {}

  static EntityRegistryOptions options() {
    EntityRegistryOptions o;
    o.idleTimeout = seconds(60);
    o.maxMailbox = 10;
    o.recorderTimeout = minutes(1);
    return o;
  }
  SteadyTime now() const { return scheduler_.clock().now(); }
  // Answers the oldest held delivery 200, with Kshard-Passivate: true.
  void completeDeliveryAskingPassivation() {
    ASSERT_FALSE(host_.deliveries.empty());
    HeldHost::Delivery d = std::move(host_.deliveries.front());
    host_.deliveries.pop_front();
    http::Response r;
    r.status = 200;
    r.headers.set(std::string(protocol::kPassivateHeader), "true");
    d.done(std::move(r));
  }
  // The listener a SingletonKeeper would add: keeps `key` active when its shard is taken.
  void keepOnTaken(EntityKey key, ShardId shard) {
    registry_.addShardsTakenListener([this, key, shard](std::vector<ShardId> shards, Epoch epoch) {
      taken_.emplace_back(shards, epoch);
      if (std::find(shards.begin(), shards.end(), shard) != shards.end())
        registry_.keepActive(key, shard);
    });
  }
  bool released(ShardId shard, Epoch epoch) {
    bool done = false;
    registry_.unassign({shard}, epoch, seconds(300),
                       [&done](std::vector<ShardId> busy) { done = busy.empty(); });
    return done;
  }

  HeldHost host_;
  ManualScheduler scheduler_;
  EntityRegistry registry_;
  Outcomes out_;
  std::vector<std::pair<std::vector<ShardId>, Epoch>> taken_;
};

TEST_F(PinnedEntityTest, KeepActiveStartsAnEntityWithoutAMessage) {
  ASSERT_THAT(registry_.assign({7}, 3), IsEmpty());
  EXPECT_TRUE(registry_.keepActive(kA, 7));
  ASSERT_EQ(host_.starts.size(), 1u);
  EXPECT_EQ(host_.starts[0].key, kA);
  EXPECT_EQ(host_.starts[0].shard, 7);
  EXPECT_EQ(host_.starts[0].epoch, 3u);
  EXPECT_GT(host_.starts[0].turn, 0u);
  EXPECT_TRUE(host_.deliveries.empty());
  EXPECT_EQ(registry_.activeEntities(), 1u);
  EXPECT_TRUE(registry_.pinned(kA));
  host_.completeStart();
  EXPECT_TRUE(registry_.keepActive(kA, 7));
  EXPECT_TRUE(host_.starts.empty()) << "an active entity was started again";
}

TEST_F(PinnedEntityTest, MessagesWaitBehindTheStartTurn) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  registry_.deliver(msg("a", 7), out_.callback());
  EXPECT_TRUE(host_.deliveries.empty()) << "a message reached the app during the start turn";
  const std::uint64_t startTurn = host_.starts.front().turn;
  host_.completeStart();
  ASSERT_EQ(host_.deliveries.size(), 1u);
  EXPECT_GT(host_.deliveries[0].message.turn, startTurn);
  host_.completeDelivery();
  EXPECT_EQ(out_.got.size(), 1u);
}

TEST_F(PinnedEntityTest, NoStartWhileTheShardIsNotOwned) {
  EXPECT_FALSE(registry_.keepActive(kA, 7)) << "not assigned";
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("b", 7), out_.callback());  // keeps the shard handing off
  registry_.unassign({7}, 2, seconds(30), [](std::vector<ShardId>) {});
  EXPECT_FALSE(registry_.keepActive(kA, 7)) << "handing off";
  host_.completeDelivery();
  host_.completeStop();
  EXPECT_FALSE(registry_.keepActive(kA, 7)) << "released";
  EXPECT_TRUE(host_.starts.empty());
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(PinnedEntityTest, NoStartWhileTheLeaseIsFencedOrNotYetConfirmed) {
  registry_.setLeaseDuration(seconds(30));
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  EXPECT_FALSE(registry_.keepActive(kA, 7)) << "no confirmation yet";
  registry_.renewLease(now());
  scheduler_.advance(seconds(23));  // past the fence (30 s - 7.5 s)
  EXPECT_FALSE(registry_.keepActive(kA, 7)) << "fenced";
  EXPECT_TRUE(host_.starts.empty());
}

TEST_F(PinnedEntityTest, FailedStartIsRetriedWithBackoffWhileOwned) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  host_.completeStart(unavailable("app down"));
  EXPECT_TRUE(host_.starts.empty()) << "retried without waiting";
  scheduler_.advance(milliseconds(200));
  ASSERT_EQ(host_.starts.size(), 1u);
  host_.completeStart(unavailable("app down"));
  scheduler_.advance(milliseconds(200));
  EXPECT_TRUE(host_.starts.empty()) << "the second retry did not back off";
  scheduler_.advance(milliseconds(200));
  ASSERT_EQ(host_.starts.size(), 1u);
  // Messages are not held behind a start that keeps failing.
  registry_.deliver(msg("a", 7), out_.callback());
  EXPECT_TRUE(host_.deliveries.empty()) << "the start is at the app";
  host_.completeStart(unavailable("app down"));
  ASSERT_EQ(host_.deliveries.size(), 1u);
  host_.completeDelivery();
  scheduler_.advance(milliseconds(800));
  ASSERT_EQ(host_.starts.size(), 1u) << "owed start not tried again after the message";
  host_.completeStart();
  scheduler_.advance(seconds(10));
  EXPECT_TRUE(host_.starts.empty()) << "a start that succeeded was tried again";
}

TEST_F(PinnedEntityTest, StartRetryIsAbandonedWhenTheShardHandsOff) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  host_.completeStart(unavailable("app down"));
  bool done = false;
  registry_.unassign({7}, 2, seconds(30),
                     [&done](std::vector<ShardId> busy) { done = busy.empty(); });
  ASSERT_EQ(host_.stops.size(), 1u) << "the start may have reached the app: it is stopped";
  host_.completeStop();
  EXPECT_TRUE(done);
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(host_.starts.empty()) << "started on a shard handed off";
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(PinnedEntityTest, PinnedEntitiesAreNeverPassivatedForIdleness) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  host_.completeStart();
  registry_.deliver(msg("b", 7), out_.callback());
  host_.completeDelivery();
  registry_.keepActive({"counter", "b"}, 7);  // an entity a message started, pinned later
  EXPECT_TRUE(host_.starts.empty()) << "an entity the app holds needs no start";
  registry_.deliver(msg("c", 7), out_.callback());
  host_.completeDelivery();
  scheduler_.advance(minutes(10));
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(host_.stops[0].key.id, "c") << "only the unpinned entity passivates";
  host_.completeStop();
  registry_.unpin(kA, false);
  scheduler_.advance(seconds(60));
  ASSERT_EQ(host_.stops.size(), 1u) << "an unpinned entity passivates again";
  EXPECT_EQ(host_.stops[0].key, kA);
}

TEST_F(PinnedEntityTest, UnpinWithStopStopsAfterTheCurrentTurn) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  registry_.unpin(kA, true);
  EXPECT_TRUE(host_.stops.empty()) << "stopped during its start turn";
  host_.completeStart();
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(PinnedEntityTest, StoppedOnHandoffAndStartedAgainByTheListenerWhenRetaken) {
  keepOnTaken(kTicker, 7);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  ASSERT_EQ(host_.starts.size(), 1u) << "the listener did not start it";
  host_.completeStart();
  EXPECT_FALSE(released(7, 2)) << "released before the pinned entity stopped";
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(host_.stops[0].key, kTicker);
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  ASSERT_THAT(registry_.assign({7}, 5), IsEmpty());
  ASSERT_EQ(host_.starts.size(), 1u);
  EXPECT_EQ(host_.starts[0].epoch, 5u);
}

TEST_F(PinnedEntityTest, TakenBackDuringItsStopItIsStartedAgain) {
  keepOnTaken(kTicker, 7);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  host_.completeStart();
  EXPECT_FALSE(released(7, 2));
  ASSERT_EQ(host_.stops.size(), 1u);
  ASSERT_THAT(registry_.assign({7}, 3), IsEmpty());  // taken back while its stop is at the app
  EXPECT_TRUE(host_.starts.empty()) << "started while its stop was at the app";
  host_.completeStop();
  ASSERT_EQ(host_.starts.size(), 1u) << "not started again once stopped";
  EXPECT_EQ(host_.starts[0].epoch, 3u);
  EXPECT_GT(host_.starts[0].turn, 1u);
}

TEST_F(PinnedEntityTest, StoppedOnDrainAndStartedAgainAfterUndrain) {
  keepOnTaken(kTicker, 7);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  host_.completeStart();
  bool drained = false;
  registry_.drain(seconds(30), [&drained](bool complete) { drained = complete; });
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  EXPECT_TRUE(drained);
  registry_.undrain();
  ASSERT_THAT(registry_.assign({7}, 2), IsEmpty());
  EXPECT_EQ(host_.starts.size(), 1u);
}

TEST_F(PinnedEntityTest, StoppedByTheLeaseFenceAndStartedAgainByTheRenewal) {
  keepOnTaken(kTicker, 7);
  registry_.setLeaseDuration(seconds(30));
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  EXPECT_TRUE(host_.starts.empty()) << "started before the lease was confirmed";
  registry_.renewLease(now());
  ASSERT_EQ(host_.starts.size(), 1u) << "the first confirmation did not start it";
  host_.completeStart();
  scheduler_.advance(seconds(23));
  ASSERT_EQ(host_.stops.size(), 1u) << "the fence did not stop a pinned entity";
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  registry_.renewLease(now());
  EXPECT_EQ(host_.starts.size(), 1u) << "the renewal that lifted the fence did not start it";
}

TEST_F(PinnedEntityTest, TheListenerHearsEveryWayShardsAreTaken) {
  keepOnTaken(kTicker, 99);
  ASSERT_THAT(registry_.assign({7, 8}, 1), IsEmpty());
  ASSERT_THAT(taken_, ElementsAre(Pair(ElementsAre(7, 8), 1u)));
  ASSERT_THAT(registry_.assign({7, 8}, 2), IsEmpty());
  EXPECT_EQ(taken_.size(), 1u) << "an assign of owned shards is no take";
  // Taken back while handing off (an entity keeps shard 7 busy).
  registry_.deliver(msg("a", 7), out_.callback());
  registry_.unassign({7}, 3, seconds(30), [](std::vector<ShardId>) {});
  ASSERT_THAT(registry_.assign({7}, 4), IsEmpty());
  ASSERT_EQ(taken_.size(), 2u);
  EXPECT_THAT(taken_[1], Pair(ElementsAre(7), 4u));
  // From the map.
  ASSERT_THAT(registry_.assign({9}, 5, true), IsEmpty());
  ASSERT_EQ(taken_.size(), 3u);
  EXPECT_THAT(taken_[2], Pair(ElementsAre(9), 5u));
  // The lease: its first confirmation, then the renewal that lifts its fence (once per epoch).
  registry_.setLeaseDuration(seconds(30));
  registry_.renewLease(now());
  ASSERT_EQ(taken_.size(), 6u);
  EXPECT_THAT(taken_[3], Pair(ElementsAre(8), 2u));
  EXPECT_THAT(taken_[4], Pair(ElementsAre(7), 4u));
  EXPECT_THAT(taken_[5], Pair(ElementsAre(9), 5u));
  registry_.renewLease(now());
  EXPECT_EQ(taken_.size(), 6u) << "a renewal of a running lease is no take";
  host_.completeDelivery();
  scheduler_.advance(seconds(23));
  ASSERT_EQ(host_.stops.size(), 1u);  // the fence stops a
  registry_.renewLease(now());
  EXPECT_EQ(taken_.size(), 9u) << "the renewal that lifts the fence";
  // The undrain.
  registry_.drain(seconds(30), [](bool) {});
  host_.completeStop();
  ASSERT_THAT(registry_.assign({7}, 9), ElementsAre(7)) << "a draining pod takes no shard";
  registry_.undrain();
  EXPECT_EQ(taken_.size(), 9u) << "nothing owned after the drain";
  ASSERT_THAT(registry_.assign({7}, 9), IsEmpty());
  EXPECT_EQ(taken_.size(), 10u);
}

TEST_F(PinnedEntityTest, StartRacingAnUnassignStopsTheEntityOnceItsStartReturns) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kTicker, 7);
  bool done = false;
  registry_.unassign({7}, 2, seconds(30),
                     [&done](std::vector<ShardId> busy) { done = busy.empty(); });
  EXPECT_FALSE(done) << "released while a start was at the app";
  EXPECT_TRUE(host_.stops.empty()) << "stopped during its start turn";
  host_.completeStart();
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_EQ(host_.stops[0].lastTurn, 1u) << "the stop names the start turn";
  host_.completeStop();
  EXPECT_TRUE(done);
}

TEST_F(PinnedEntityTest, StartInFlightWhenTheFenceBeginsStopsItAfterward) {
  registry_.setLeaseDuration(seconds(30));
  registry_.renewLease(now());
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kTicker, 7);
  scheduler_.advance(seconds(23));
  EXPECT_TRUE(host_.stops.empty());
  host_.completeStart();
  ASSERT_EQ(host_.stops.size(), 1u) << "a started entity ran on behind the fence";
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(host_.starts.empty());
}

TEST_F(PinnedEntityTest, TheFirstTurnOfARememberedEntityWaitsForItsRecord) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 4), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  registry_.deliver(tell("a", 7), out_.callback());
  EXPECT_TRUE(host_.deliveries.empty()) << "delivered before it was recorded";
  EXPECT_TRUE(out_.got.empty()) << "a tell answered before its entity was recorded";
  ASSERT_EQ(recorder.starts.size(), 1u);
  EXPECT_EQ(recorder.starts[0].key, kA);
  EXPECT_EQ(recorder.starts[0].epoch, 4u);
  HeldRecorder::complete(recorder.starts);
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].response->status, 202);
  ASSERT_EQ(host_.deliveries.size(), 1u);
  host_.completeDelivery();
  host_.completeDelivery();
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeDelivery();
  EXPECT_TRUE(recorder.starts.empty()) << "recorded twice";
  registry_.deliver({msg("x", 7)}, out_.callback());
  EXPECT_EQ(recorder.starts.size(), 1u);
  recorder.types.clear();
  registry_.deliver({msg("y", 7)}, out_.callback());
  EXPECT_EQ(recorder.starts.size(), 1u) << "a type not remembered was recorded";
  HeldRecorder::complete(recorder.starts);
  while (!host_.deliveries.empty()) host_.completeDelivery();
  scheduler_.advance(minutes(5));
  ASSERT_EQ(host_.stops.size(), 1u) << "only y passivates: a and x are remembered";
  EXPECT_EQ(host_.stops[0].key.id, "y");
}

TEST_F(PinnedEntityTest, AFailedRecordRefusesTheWaitingMessages) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  registry_.deliver(tell("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts, unavailable("store down"));
  ASSERT_EQ(out_.got.size(), 2u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kNotOwned);
  EXPECT_EQ(out_.got[1].refusal, Refusal::kNotOwned) << "the tell was not refused";
  EXPECT_TRUE(host_.deliveries.empty());
  EXPECT_EQ(registry_.activeEntities(), 0u);
  EXPECT_TRUE(released(7, 2));
}

TEST_F(PinnedEntityTest, ARecordAtItsBoundRefusesTheWaitingMessagesAsSuch) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts, resourceExhausted("shard 7 remembers 1000 entities"));
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kRememberedFull);
  EXPECT_TRUE(isOverload(out_.got[0].refusal)) << "a retry would meet the bound again";
  EXPECT_EQ(overloadCode(Refusal::kRememberedFull), protocol::errors::kRememberedEntitiesFull);
  EXPECT_TRUE(host_.deliveries.empty());
}

TEST_F(PinnedEntityTest, KeptActiveEntitiesAreNotRecordedAgain) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  registry_.deliver(msg("a", 7), out_.callback());
  host_.completeStart();
  ASSERT_EQ(host_.deliveries.size(), 1u);
  EXPECT_TRUE(recorder.starts.empty());
}

TEST_F(PinnedEntityTest, PassivationAskedByTheAppForgetsThenStopsAfterTheTurn) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts);
  completeDeliveryAskingPassivation();
  EXPECT_EQ(out_.got.size(), 1u);
  ASSERT_EQ(recorder.forgets.size(), 1u);
  EXPECT_EQ(recorder.forgets[0].key, kA);
  EXPECT_TRUE(host_.stops.empty()) << "stopped before it was forgotten";
  // A tell arriving now restarts it after the stop, and is answered once it is recorded again.
  registry_.deliver(tell("a", 7), out_.callback());
  EXPECT_EQ(out_.got.size(), 1u);
  HeldRecorder::complete(recorder.forgets);
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  ASSERT_EQ(recorder.starts.size(), 1u) << "restarted without a record";
  HeldRecorder::complete(recorder.starts);
  ASSERT_EQ(out_.got.size(), 2u);
  EXPECT_EQ(out_.got[1].response->status, 202);
  EXPECT_EQ(host_.deliveries.size(), 1u);
}

TEST_F(PinnedEntityTest, AFailedForgetKeepsTheEntityActive) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts);
  completeDeliveryAskingPassivation();
  HeldRecorder::complete(recorder.forgets, unavailable("store down"));
  scheduler_.advance(minutes(5));
  EXPECT_TRUE(host_.stops.empty()) << "stopped while still recorded";
  EXPECT_TRUE(registry_.pinned(kA));
}

TEST_F(PinnedEntityTest, PassivationAskedByAStartUnpinsAndStops) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kA, 7);
  host_.completeStart({}, true);
  ASSERT_EQ(host_.stops.size(), 1u);
  EXPECT_FALSE(registry_.pinned(kA));
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

TEST_F(PinnedEntityTest, ASingletonIgnoresPassivation) {
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.keepActive(kTicker, 7);
  host_.completeStart({}, true);
  Message m = msg("ticker", 7);
  m.key = kTicker;
  registry_.deliver(m, out_.callback());
  completeDeliveryAskingPassivation();
  scheduler_.advance(minutes(5));
  EXPECT_TRUE(host_.stops.empty());
  EXPECT_TRUE(registry_.pinned(kTicker));
}

// The app's Kshard-Passivate with a tell already answered 202 behind the turn: the tell reaches
// the app first, and only then is the entity forgotten and stopped. (Forgotten first, the tell
// would wait for a new record, and a failed record would refuse a tell already acknowledged.)
TEST_F(PinnedEntityTest, AnAcknowledgedTellIsDeliveredBeforeTheEntityIsForgotten) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts);
  Outcomes told;
  registry_.deliver(tell("a", 7), told.callback());
  ASSERT_EQ(told.got.size(), 1u);
  ASSERT_EQ(told.got[0].response->status, 202) << "queued behind the ask";
  completeDeliveryAskingPassivation();
  ASSERT_EQ(host_.deliveries.size(), 1u) << "the tell answered 202 did not reach the app";
  EXPECT_TRUE(recorder.forgets.empty()) << "forgotten with an acknowledged tell waiting";
  host_.completeDelivery();
  HeldRecorder::complete(recorder.forgets);
  host_.completeStop();
  EXPECT_TRUE(recorder.starts.empty()) << "recorded again with nothing waiting";
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

// A tell held for its entity's record is answered only while a new tell would be taken: once
// the lease has run out it is refused (its sender tries the next owner), never answered 202 and
// then dropped. The same for a failed forget, which also answers the held tells.
TEST_F(PinnedEntityTest, AHeldTellIsRefusedWhenItsRecordLandsAfterTheLeaseRanOut) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  registry_.setLeaseDuration(seconds(30));
  registry_.renewLease(now());
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  Outcomes told;
  registry_.deliver(tell("a", 7), told.callback());
  EXPECT_TRUE(told.got.empty()) << "held for the record";
  scheduler_.advance(seconds(31));  // the fence began at 22.5 s, the lease ran out at 30 s
  HeldRecorder::complete(recorder.starts);
  ASSERT_EQ(told.got.size(), 1u);
  EXPECT_EQ(told.got[0].refusal, Refusal::kNotOwned) << "answered 202 after the lease ran out";
  EXPECT_TRUE(host_.deliveries.empty());
}

TEST_F(PinnedEntityTest, AHeldTellIsRefusedWhenTheForgetFailsAfterTheLeaseRanOut) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  registry_.setLeaseDuration(seconds(30));
  registry_.renewLease(now());
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts);
  completeDeliveryAskingPassivation();
  Outcomes told;
  registry_.deliver(tell("a", 7), told.callback());  // held: forgetting
  EXPECT_TRUE(told.got.empty());
  scheduler_.advance(seconds(31));
  HeldRecorder::complete(recorder.forgets, unavailable("store down"));
  ASSERT_EQ(told.got.size(), 1u);
  EXPECT_EQ(told.got[0].refusal, Refusal::kNotOwned) << "answered 202 after the lease ran out";
}

// An entity whose stop failed may still hold state at the app: a failed record refuses its
// messages but keeps it, so that its shard is released only after a stop succeeds.
TEST_F(PinnedEntityTest, AnEntityWhoseStopFailedIsNotDroppedByAFailedRecord) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  HeldRecorder::complete(recorder.starts);
  completeDeliveryAskingPassivation();
  HeldRecorder::complete(recorder.forgets);
  host_.completeStop(unavailable("app could not save"));  // the app still holds a
  registry_.deliver(msg("a", 7), out_.callback());         // needs a new record
  ASSERT_EQ(recorder.starts.size(), 1u);
  HeldRecorder::complete(recorder.starts, unavailable("store down"));
  ASSERT_EQ(out_.got.size(), 2u);
  EXPECT_EQ(out_.got[1].refusal, Refusal::kNotOwned);
  EXPECT_EQ(registry_.activeEntities(), 1u) << "dropped without a successful stop";
  EXPECT_FALSE(released(7, 2)) << "released with no successful stop of an entity the app holds";
  ASSERT_EQ(host_.stops.size(), 1u);
  host_.completeStop();
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

// A start that failed while the lease did not take messages (not yet confirmed) is still owed:
// the listener's keepActive after the confirmation starts it, once.
TEST_F(PinnedEntityTest, AStartOwedWhileTheLeaseWasNotConfirmedRunsOnceConfirmed) {
  keepOnTaken(kTicker, 7);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  ASSERT_EQ(host_.starts.size(), 1u);
  registry_.setLeaseDuration(seconds(30));  // enabled, not yet confirmed: not taking messages
  host_.completeStart(unavailable("app busy"));
  EXPECT_TRUE(host_.starts.empty());
  registry_.renewLease(now());
  ASSERT_EQ(host_.starts.size(), 1u) << "the owed start did not run after the confirmation";
  host_.completeStart();
  EXPECT_TRUE(registry_.pinned(kTicker));
  scheduler_.advance(seconds(10));
  EXPECT_TRUE(host_.starts.empty());
}

// unpin(stop) during the record is not undone when the record lands: the entity stops, and the
// message that waited restarts it unpinned, with no start turn.
TEST_F(PinnedEntityTest, UnpinWithStopDuringTheRecordIsNotUndone) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());  // its record is pending
  registry_.keepActive(kA, 7);
  registry_.unpin(kA, true);
  HeldRecorder::complete(recorder.starts);
  EXPECT_FALSE(registry_.pinned(kA)) << "unpin was undone by the record";
  host_.completeStop();
  EXPECT_TRUE(host_.starts.empty()) << "started again after unpin(stop)";
  ASSERT_EQ(host_.deliveries.size(), 1u);
}

// A recorder that never answers holds no handoff forever: past its deadline the call counts as
// failed (a record: the waiting messages are refused; a forget: the entity stays recorded and
// stops with its shard), and its late answer changes nothing.
TEST_F(PinnedEntityTest, ARecorderThatNeverAnswersHoldsNoHandoff) {
  HeldRecorder recorder;
  registry_.setRecorder(&recorder);
  ASSERT_THAT(registry_.assign({7, 8}, 1), IsEmpty());
  registry_.deliver(msg("a", 7), out_.callback());
  std::vector<bool> done;
  const auto unassign = [this, &done](ShardId shard) {
    registry_.unassign({shard}, 2, seconds(300),
                       [&done](std::vector<ShardId> busy) { done.push_back(busy.empty()); });
  };
  unassign(7);
  EXPECT_TRUE(done.empty()) << "released while its entity's record was pending";
  scheduler_.advance(options().recorderTimeout);
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].refusal, Refusal::kNotOwned);
  EXPECT_EQ(registry_.activeEntities(), 0u);
  EXPECT_EQ(done, std::vector<bool>{true});
  HeldRecorder::complete(recorder.starts);  // too late
  EXPECT_TRUE(host_.deliveries.empty());
  registry_.deliver(msg("b", 8), out_.callback());
  HeldRecorder::complete(recorder.starts);
  completeDeliveryAskingPassivation();
  ASSERT_EQ(recorder.forgets.size(), 1u);
  unassign(8);
  scheduler_.advance(options().recorderTimeout);
  ASSERT_EQ(host_.stops.size(), 1u) << "the entity was not stopped with its shard";
  host_.completeStop();
  EXPECT_EQ(done, (std::vector<bool>{true, true}));
  HeldRecorder::complete(recorder.forgets);  // too late
  EXPECT_EQ(registry_.activeEntities(), 0u);
}

// The host and the recorder get keys of their own: one that answers at once, and then reads the
// key (a log line), reads no entity the answer removed (ASan would report it).
class AtOnceHost final : public EntityHost {
 public:
  void deliver(Message, Epoch, UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    done(http::Response{});
  }
  void stop(const EntityKey& key, ShardId, std::uint64_t, std::function<void(Status)> done) override {
    done({});
    readAfter += key.id.size();
  }
  void start(const EntityKey& key, ShardId, Epoch, std::uint64_t, StartCallback done) override {
    http::Response r;
    r.headers.set(std::string(protocol::kPassivateHeader), "true");
    done(std::move(r));  // stopped and removed at once
    readAfter += key.id.size();
  }
  std::size_t readAfter = 0;
};

class AtOnceRecorder final : public EntityRecorder {
 public:
  bool remembered(const std::string&) override { return true; }
  void started(const EntityKey& key, ShardId, Epoch, std::function<void(Status)> done) override {
    done(unavailable("store down"));  // the entity is dropped at once
    readAfter += key.id.size();
  }
  void forgotten(const EntityKey& key, ShardId, Epoch, std::function<void(Status)> done) override {
    done({});
    readAfter += key.id.size();
  }
  std::size_t readAfter = 0;
};

TEST(PinnedEntityKeysTest, ACalleeMayReadItsKeyAfterAnsweringAtOnce) {
  AtOnceHost host;
  ManualScheduler scheduler;
  EntityRegistry registry(host, scheduler, {}, Logger("test", LogLevel::kError));
  AtOnceRecorder recorder;
  registry.setRecorder(&recorder);
  ASSERT_THAT(registry.assign({7}, 1), IsEmpty());
  registry.keepActive(kA, 7);  // started, forgotten and stopped within the start call
  EXPECT_EQ(host.readAfter, 2u);
  EXPECT_EQ(recorder.readAfter, 1u);
  EXPECT_EQ(registry.activeEntities(), 0u);
  Outcomes out;
  registry.deliver(msg("b", 7), out.callback());
  EXPECT_EQ(recorder.readAfter, 2u);
  ASSERT_EQ(out.got.size(), 1u);
  EXPECT_EQ(out.got[0].refusal, Refusal::kNotOwned);
}

}  // namespace
}  // namespace kshard::sidecar
