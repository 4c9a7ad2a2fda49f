// RememberedEntities on simulated time against the in-memory API server: an entity is recorded
// before its first turn; a shard's next owner claims its record and keeps every entity listed
// active; the record's epoch and resourceVersion refuse a late write of an older owner; conflicts
// and writes of unknown outcome are read again; the bounds refuse with a clear error.
#include "sidecar/remembered_entities.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "base/scheduler.h"
#include "tests/kube/fake_api_server.h"

namespace kshard::sidecar {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
const kube::ResourceRef& kRecords = kube::resources::kShardEntities;

// The fake API server behind a switch: a request the test picks is held until released (a write
// on its way), or applied and then answered with an error (a write of unknown outcome).
class Wire final : public http::Client {
 public:
  explicit Wire(kube::testing::FakeApiServer& api) : api_(api) {}
  void send(http::Request request, http::ResponseCallback done) override {
    if (hold && hold(request)) {
      held_.push_back({std::move(request), std::move(done)});
      return;
    }
    if (lose && lose(request)) {
      api_.send(std::move(request), [done = std::move(done)](StatusOr<http::Response>) {
        done(Status(StatusCode::kOutcomeUnknown, "connection reset after the request was sent"));
      });
      return;
    }
    api_.send(std::move(request), std::move(done));
  }
  StatusOr<std::unique_ptr<http::ResponseStream>> openStream(http::Request r) override {
    return api_.openStream(std::move(r));
  }
  std::size_t held() const { return held_.size(); }
  void release() {
    auto held = std::move(held_);
    held_.clear();
    for (auto& [request, done] : held) api_.send(std::move(request), std::move(done));
  }

  std::function<bool(const http::Request&)> hold;
  std::function<bool(const http::Request&)> lose;

 private:
  kube::testing::FakeApiServer& api_;
  std::vector<std::pair<http::Request, http::ResponseCallback>> held_;
};

bool isWrite(const http::Request& r) {
  return r.method == http::Method::kPost || r.method == http::Method::kPut;
}

// One pod's side: its registry's ownership, the entities it was told to keep active.
struct Pod {
  Pod(kube::Client& api, Scheduler& scheduler, RememberedEntitiesOptions options = {})
      : recorder(
            api, scheduler, {"demo", "counter", "map-uid"},
            [this](const EntityKey& k, ShardId s) {
              kept.push_back(k.id + "@" + std::to_string(s));
              if (onKeep) onKeep();
            },
            [this](ShardId s) -> std::optional<Epoch> {
              auto it = owned.find(s);
              return it == owned.end() ? std::nullopt : std::optional<Epoch>(it->second);
            },
            Logger("t", LogLevel::kError, [](std::string_view) {}), options) {
    sharding::ShardMap map;
    map.metadata.name = "counter";
    map.metadata.uid = "map-uid";
    map.spec.rememberedEntityTypes = {"counter"};
    recorder.follow(map);
  }
  void take(ShardId shard, Epoch epoch) {
    owned[shard] = epoch;
    recorder.shardsTaken({shard}, epoch);
  }
  // Calls started() and answers what done() got (nullopt: not yet).
  std::shared_ptr<std::optional<Status>> start(const std::string& id, ShardId shard) {
    auto out = std::make_shared<std::optional<Status>>();
    recorder.started({"counter", id}, shard, owned.at(shard), [out](Status s) { *out = s; });
    return out;
  }
  std::shared_ptr<std::optional<Status>> forget(const std::string& id, ShardId shard) {
    auto out = std::make_shared<std::optional<Status>>();
    recorder.forgotten({"counter", id}, shard, owned.at(shard), [out](Status s) { *out = s; });
    return out;
  }

  std::map<ShardId, Epoch> owned;
  std::vector<std::string> kept;  // "id@shard"
  std::function<void()> onKeep;
  RememberedEntities recorder;
};

class RememberedEntitiesTest : public ::testing::Test {
 protected:
  // The stored record of `shard`: its epoch and ids.
  std::optional<std::pair<std::int64_t, std::vector<std::string>>> record(ShardId shard) {
    auto o = api_.get(kRecords, "demo", "counter-" + std::to_string(shard));
    if (!o) return std::nullopt;
    std::vector<std::string> ids;
    for (const json& e : (*o)["spec"]["entities"]) ids.push_back(e["id"]);
    return std::pair{(*o)["spec"]["epoch"].get<std::int64_t>(), ids};
  }
  void putRecord(ShardId shard, std::int64_t epoch, std::vector<std::string> ids) {
    sharding::ShardEntities r{"counter", shard, epoch, {}};
    for (auto& id : ids) r.entities.push_back({"counter", id});
    api_.put(kRecords, sharding::shardEntitiesObject({"demo", "counter", "map-uid"}, r));
  }
  std::size_t writes() const {
    std::size_t n = 0;
    for (const auto& r : api_.requests())
      n += isWrite(r) && r.target.find("shardentities") != std::string::npos;
    return n;
  }

  ManualScheduler scheduler_;
  SeededRandom random_{1};
  kube::testing::FakeApiServer api_{scheduler_.clock()};
  Wire wire_{api_};
  Logger quiet_{"t", LogLevel::kError, [](std::string_view) {}};
  kube::Client client_{wire_, scheduler_, random_, quiet_, {.maxRetries = 0}};
};

TEST_F(RememberedEntitiesTest, ANewEntityIsRecordedBeforeItsFirstTurn) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  EXPECT_FALSE(record(3)) << "created only once the shard has a remembered entity";
  std::optional<std::pair<std::int64_t, std::vector<std::string>>> atDone;
  a.recorder.started({"counter", "x"}, 3, 5, [&](Status s) {
    EXPECT_TRUE(s.ok()) << s.toString();
    atDone = record(3);
  });
  ASSERT_TRUE(atDone) << "the turn was never let through";
  EXPECT_EQ(*atDone, (std::pair<std::int64_t, std::vector<std::string>>{5, {"x"}}));
  auto o = api_.get(kRecords, "demo", "counter-3");
  EXPECT_EQ((*o)["metadata"]["labels"]["kshard.io/shard-map"], "counter");
  EXPECT_EQ((*o)["metadata"]["ownerReferences"][0]["uid"], "map-uid");
  EXPECT_EQ(a.recorder.rememberedCount(), 1u);
  // Known already: a second start (its first turn refused and sent again) writes nothing.
  const std::size_t before = writes();
  EXPECT_TRUE(a.start("x", 3)->value().ok());
  EXPECT_EQ(writes(), before);
}

TEST_F(RememberedEntitiesTest, OnlyRememberedTypesAreAskedAbout) {
  Pod a(client_, scheduler_);
  EXPECT_TRUE(a.recorder.remembered("counter"));
  EXPECT_FALSE(a.recorder.remembered("session"));
}

TEST_F(RememberedEntitiesTest, StartsThatWaitTogetherGoInOneWrite) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  wire_.hold = isWrite;
  auto x = a.start("x", 3);
  auto y = a.start("y", 3);
  auto z = a.start("z", 3);
  EXPECT_EQ(wire_.held(), 1u);
  wire_.hold = nullptr;
  wire_.release();
  EXPECT_TRUE(x->has_value() && y->has_value() && z->has_value());
  EXPECT_EQ(writes(), 2u);  // x alone, then y and z together
  EXPECT_EQ(record(3)->second, (std::vector<std::string>{"x", "y", "z"}));
}

TEST_F(RememberedEntitiesTest, AConflictIsReadAgainAndRetried) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  ASSERT_TRUE(a.start("x", 3)->value().ok());
  // Someone wrote the record since (the same epoch: a write of this pod whose answer was lost).
  putRecord(3, 5, {"w", "x"});
  auto y = a.start("y", 3);
  ASSERT_TRUE(y->has_value());
  EXPECT_TRUE(y->value().ok()) << y->value().toString();
  EXPECT_EQ(record(3)->second, (std::vector<std::string>{"w", "x", "y"}));
  // The entity that appeared is kept active: it is in this pod's record.
  EXPECT_EQ(a.kept, (std::vector<std::string>{"w@3"}));
}

TEST_F(RememberedEntitiesTest, TheNextOwnerClaimsTheRecordThenKeepsEachEntityActive) {
  {
    Pod a(client_, scheduler_);
    a.take(3, 5);
    ASSERT_TRUE(a.start("x", 3)->value().ok());
    ASSERT_TRUE(a.start("y", 3)->value().ok());
    // a crashes here: recorded, its first turns maybe never ran.
  }
  Pod b(client_, scheduler_);
  std::vector<std::int64_t> epochAtKeep;
  b.onKeep = [&] { epochAtKeep.push_back(record(3)->first); };
  b.take(3, 7);
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3", "y@3"}));
  EXPECT_EQ(epochAtKeep, (std::vector<std::int64_t>{7, 7})) << "kept active before the claim";
  EXPECT_EQ(record(3)->first, 7);
  // Taken again at the same epoch (the lease's fence lifted): kept active again, nothing read.
  const std::size_t requests = api_.requestCount();
  b.recorder.shardsTaken({3}, 7);
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3", "y@3", "x@3", "y@3"}));
  EXPECT_EQ(api_.requestCount(), requests);
}

TEST_F(RememberedEntitiesTest, AStaleOwnersLateWriteIsRefused) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  ASSERT_TRUE(a.start("x", 3)->value().ok());
  // a is cut off: its next write is on its way while b takes the shard and claims the record.
  wire_.hold = isWrite;
  auto late = a.start("late", 3);
  wire_.hold = nullptr;
  Pod b(client_, scheduler_);
  b.take(3, 7);
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3"}));
  ASSERT_EQ(record(3)->first, 7);
  wire_.release();
  ASSERT_TRUE(late->has_value());
  EXPECT_EQ(late->value().code(), StatusCode::kFailedPrecondition) << late->value().toString();
  EXPECT_EQ(record(3)->second, (std::vector<std::string>{"x"}));
  // And any later call of a's ownership is refused without a write.
  const std::size_t before = writes();
  EXPECT_EQ(a.start("later", 3)->value().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(a.forget("x", 3)->value().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(record(3)->second, (std::vector<std::string>{"x"}));
  EXPECT_LE(writes(), before);
}

TEST_F(RememberedEntitiesTest, AStaleOwnersLateCreateLosesToTheNewOwnersRecord) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  wire_.hold = isWrite;
  auto late = a.start("late", 3);  // a create, on its way
  wire_.hold = nullptr;
  Pod b(client_, scheduler_);
  b.take(3, 7);
  ASSERT_TRUE(b.start("n", 3)->value().ok());
  wire_.release();
  EXPECT_EQ(late->value().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*record(3), (std::pair<std::int64_t, std::vector<std::string>>{7, {"n"}}));
}

TEST_F(RememberedEntitiesTest, ASecondLookFindsALateCreateOfThePreviousOwner) {
  Pod b(client_, scheduler_);
  b.take(3, 7);  // no record yet
  EXPECT_TRUE(b.kept.empty());
  putRecord(3, 5, {"z"});  // the previous owner's create lands late
  scheduler_.advance(59s);
  EXPECT_TRUE(b.kept.empty());
  scheduler_.advance(2s);
  EXPECT_EQ(b.kept, (std::vector<std::string>{"z@3"}));
  EXPECT_EQ(record(3)->first, 7);
}

TEST_F(RememberedEntitiesTest, TwoTakesInARowOnlyTheNewestClaims) {
  putRecord(3, 4, {"x"});
  Pod b(client_, scheduler_);
  wire_.hold = [](const http::Request& r) { return r.method == http::Method::kGet; };
  b.take(3, 5);  // its list is on its way
  b.owned.erase(3);
  wire_.hold = nullptr;
  b.take(3, 7);  // released and taken again at once
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3"}));
  wire_.release();  // the first take's list answers late: it is ignored
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3"}));
  EXPECT_EQ(record(3)->first, 7);
}

TEST_F(RememberedEntitiesTest, AShardThatMovesWhileAStartIsWrittenRefusesIt) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  wire_.hold = isWrite;
  auto x = a.start("x", 3);
  a.owned.erase(3);  // unassigned meanwhile
  wire_.hold = nullptr;
  wire_.release();
  ASSERT_TRUE(x->has_value());
  EXPECT_EQ(x->value().code(), StatusCode::kFailedPrecondition);
  // It was stored: the next owner starts it (and the refused message, sent there, finds it).
  Pod b(client_, scheduler_);
  b.take(3, 7);
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3"}));
}

TEST_F(RememberedEntitiesTest, AForgottenEntityLeavesTheRecordWhichStays) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  ASSERT_TRUE(a.start("x", 3)->value().ok());
  ASSERT_TRUE(a.start("y", 3)->value().ok());
  EXPECT_TRUE(a.forget("x", 3)->value().ok());
  EXPECT_EQ(record(3)->second, (std::vector<std::string>{"y"}));
  EXPECT_TRUE(a.forget("y", 3)->value().ok());
  // Kept, empty, with its epoch: it still fences an older owner's late create.
  EXPECT_EQ(*record(3), (std::pair<std::int64_t, std::vector<std::string>>{5, {}}));
  const std::size_t before = writes();
  EXPECT_TRUE(a.forget("never", 3)->value().ok());
  EXPECT_EQ(writes(), before);
  Pod b(client_, scheduler_);
  b.take(3, 7);
  EXPECT_TRUE(b.kept.empty());
}

TEST_F(RememberedEntitiesTest, AWriteOfUnknownOutcomeIsReadAgain) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  wire_.lose = isWrite;  // stored, answered with an error
  auto x = a.start("x", 3);
  wire_.lose = nullptr;
  EXPECT_FALSE(x->has_value()) << "waits for the retry";
  scheduler_.advance(1s);
  ASSERT_TRUE(x->has_value());
  EXPECT_TRUE(x->value().ok()) << x->value().toString();
  EXPECT_EQ(record(3)->second, (std::vector<std::string>{"x"}));
  EXPECT_EQ(writes(), 1u) << "found stored: not written twice";
}

TEST_F(RememberedEntitiesTest, AStartOrAForgetFailsUnavailableAfterItsAttempts) {
  Pod a(client_, scheduler_);
  a.take(3, 5);
  ASSERT_TRUE(a.start("y", 3)->value().ok());
  api_.intercept([](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
    if (!isWrite(r)) return std::nullopt;
    return StatusOr<http::Response>(Status(StatusCode::kUnavailable, "etcd is down"));
  });
  auto x = a.start("x", 3);
  auto f = a.forget("y", 3);
  scheduler_.advance(30s);
  ASSERT_TRUE(x->has_value() && f->has_value());
  EXPECT_EQ(x->value().code(), StatusCode::kUnavailable);
  EXPECT_EQ(f->value().code(), StatusCode::kUnavailable);
  api_.intercept(nullptr);
  scheduler_.advance(30s);
  // The forget failed: the entity stays active at the registry, and recorded.
  EXPECT_EQ(record(3)->second, std::vector<std::string>{"y"});
}

TEST_F(RememberedEntitiesTest, BoundsRefuseWithAClearError) {
  RememberedEntitiesOptions o;
  o.record.maxEntities = 2;
  o.maxPerMap = 3;
  putRecord(9, 1, {"other"});  // another shard's, another pod's
  Pod a(client_, scheduler_, o);
  a.take(3, 5);
  ASSERT_TRUE(a.start("x", 3)->value().ok());
  ASSERT_TRUE(a.start("y", 3)->value().ok());
  auto z = a.start("z", 3);
  EXPECT_EQ(z->value().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(z->value().message().find("shard 3 remembers as many entities as it may (2"),
            std::string::npos)
      << z->value().message();
  a.take(4, 5);
  auto w = a.start("w", 4);
  EXPECT_EQ(w->value().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(w->value().message().find("ShardMap counter remembers as many entities as it may (3)"),
            std::string::npos)
      << w->value().message();
  EXPECT_TRUE(a.forget("x", 3)->value().ok());
  EXPECT_TRUE(a.start("w", 4)->value().ok()) << "room again";
}

TEST_F(RememberedEntitiesTest, EntitiesOfTypesNoLongerRememberedAreNotStarted) {
  sharding::ShardEntities r{"counter", 3, 4, {{"counter", "x"}, {"old", "y"}}};
  api_.put(kRecords, sharding::shardEntitiesObject({"demo", "counter", ""}, r));
  Pod b(client_, scheduler_);
  b.take(3, 7);
  EXPECT_EQ(b.kept, (std::vector<std::string>{"x@3"}));
}

TEST_F(RememberedEntitiesTest, AMapThatRemembersNothingReadsNothingOnATake) {
  Pod a(client_, scheduler_);
  a.recorder.follow(sharding::ShardMap{});
  const std::size_t before = api_.requestCount();
  a.take(3, 5);
  EXPECT_EQ(api_.requestCount(), before);
}

}  // namespace
}  // namespace kshard::sidecar
