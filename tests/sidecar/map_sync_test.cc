// MapSync on simulated time, with a scripted manager and a fake API server: versions arrive as
// changes when the manager has them, and from the API server whenever the changes do not give
// exactly the announced version.
#include "sidecar/map_sync.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/scheduler.h"
#include "sharding/json_delta.h"
#include "sharding/shard_map_json.h"
#include "sharding/shard_map_segments.h"
#include "tests/kube/fake_transport.h"
#include "tests/sidecar/held_host.h"
#include "tests/sidecar/map_fixture.h"
#include "tests/sidecar/scripted_client.h"

namespace kshard::sidecar {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::makeMap;

sharding::ShardMap versioned(sharding::ShardMap m, const std::string& rv) {
  m.metadata.resourceVersion = rv;
  return m;
}

// The operator's signature: its token for this map's sidecars, as TokenAuthorizer checks it.
class OperatorCheck final : public RequestAuthorizer {
 public:
  Status authorizeManagerAnswer(const http::Request& r) override {
    return r.headers.get("Authorization").value_or("") == "Bearer operator"
               ? Status()
               : Status(StatusCode::kUnauthenticated, "not the operator's token");
  }
  Status authorizeOperator(const http::Request&) override {
    return Status(StatusCode::kUnauthenticated, "not a command");
  }
  Status authorizePeer(const http::Request&) override { return {}; }
};

Identity self() {
  Identity s;
  s.pod = "counter-0";
  s.uid = "counter-0-uid";
  s.incarnation = "counter-0-inc";
  s.shardMap = {"demo", "counter"};
  return s;
}

class MapSyncTest : public ::testing::Test {
 protected:
  MapSyncTest() {
    apiServesStored();
    manager_ = testing::scriptedManagerClient(script_, table_, scheduler_, random_, quiet_, {});
    sync_ = std::make_unique<MapSync>(self(), applier_, *manager_, &api_, &operatorCheck_,
                                      scheduler_, random_, quiet_);
  }
  ~MapSyncTest() override {
    sync_->stop();
    manager_->stop();
  }

  // The manager's answer for a reader holding `from`, like operator/map_history.h's.
  static http::Response changes(const sharding::ShardMap& from, const sharding::ShardMap& to,
                                bool wantKnown = true) {
    const std::string text = sharding::toJson(to).dump();
    json body = {{"kind", "ShardMapDelta"},
                 {"from", from.metadata.resourceVersion},
                 {"resourceVersion", to.metadata.resourceVersion},
                 {"wantKnown", wantKnown},
                 {"digest", sharding::textDigest(text)},
                 {"changes", sharding::diffJson(sharding::toJson(from), sharding::toJson(to))}};
    return signed_(testing::answer(200, body.dump()));
  }
  static http::Response signed_(http::Response r) {
    r.headers.set("Kshard-Manager-Authorization", "Bearer operator");
    return r;
  }
  std::int64_t epochSeen() const { return table_.snapshot()->epoch; }
  // The API server answers every read with stored_, or refuses every read.
  void apiServesStored() {
    transport_.setHandler([this](const http::Request& r) {
      ++apiReads_;
      EXPECT_NE(r.target.find("/shardmaps/counter"), std::string::npos) << r.target;
      return std::optional<StatusOr<http::Response>>(
          kube::testing::jsonResponse(200, sharding::toJson(stored_).dump()));
    });
  }
  void apiDown() {
    transport_.setHandler([this](const http::Request&) {
      ++apiReads_;
      return std::optional<StatusOr<http::Response>>(unavailable("API server down"));
    });
  }

  Logger quiet_{"t", LogLevel::kError, [](std::string_view) {}};
  ManualScheduler scheduler_;
  SeededRandom random_{1};
  RoutingTable table_;
  testing::HeldHost host_;
  EntityRegistry registry_{host_, scheduler_, {}, quiet_};
  MapApplier applier_{self(), table_, registry_, quiet_};
  std::shared_ptr<testing::ScriptedManager> script_ =
      std::make_shared<testing::ScriptedManager>();
  kube::testing::FakeTransport transport_;
  kube::Client api_{transport_, scheduler_, random_, quiet_, {.maxRetries = 0}};
  OperatorCheck operatorCheck_;
  std::unique_ptr<ManagerClient> manager_;
  std::unique_ptr<MapSync> sync_;
  sharding::ShardMap stored_ = versioned(makeMap(10, 1, {{"counter-0", "1-10"}}), "5");
  int apiReads_ = 0;
};

TEST_F(MapSyncTest, TheFirstVersionComesFromTheApiWhenTheManagerHasNone) {
  sync_->announce("5");  // the scripted manager has no answer: Unavailable
  EXPECT_EQ(apiReads_, 1);
  EXPECT_EQ(sync_->version(), "5");
  EXPECT_EQ(epochSeen(), 1);
  EXPECT_EQ(sync_->stats().apiReads, 1u);
}

TEST_F(MapSyncTest, ANewVersionArrivesAsChanges) {
  const sharding::ShardMap v5 = stored_;
  // The manager holds no version this sidecar holds (none): it says so, without the map.
  script_->answers.push_back(signed_(testing::answer(
      200, json{{"kind", "ShardMapDelta"},
                {"resourceVersion", "5"},
                {"wantKnown", true},
                {"digest", sharding::textDigest(sharding::toJson(v5).dump())}}
               .dump())));
  sync_->announce("5");
  ASSERT_EQ(sync_->version(), "5");
  EXPECT_NE(script_->seen.back().target.find("since=&want=5"), std::string::npos)
      << script_->seen.back().target;
  EXPECT_EQ(apiReads_, 1) << "the first version comes from the API server";

  const sharding::ShardMap v6 =
      versioned(makeMap(10, 2, {{"counter-0", "1-5"}, {"counter-1", "6-10"}}), "6");
  script_->answers.push_back(changes(v5, v6));
  sync_->announce("6");
  EXPECT_NE(script_->seen.back().target.find("since=5&want=6"), std::string::npos)
      << script_->seen.back().target;
  EXPECT_EQ(sync_->version(), "6");
  EXPECT_EQ(epochSeen(), 2);
  EXPECT_EQ(table_.snapshot()->ownerOf(7)->pod, "counter-1");
  EXPECT_EQ(apiReads_, 1) << "the changes sufficed";
  EXPECT_EQ(sync_->stats().deltas, 1u);
}

TEST_F(MapSyncTest, ChangesThatDoNotGiveTheDigestAreNotApplied) {
  sync_->announce("5");  // from the API
  sharding::ShardMap v6 =
      versioned(makeMap(10, 2, {{"counter-0", "1-5"}, {"counter-1", "6-10"}}), "6");
  v6.metadata.generation = 9;
  // Changes computed from another base than the one held: they fit it, but leave the
  // generation it has (0) where the manager's base had v6's (9).
  sharding::ShardMap other = stored_;
  other.metadata.generation = 9;
  http::Response wrong = changes(other, v6);
  script_->answers.push_back(wrong);
  stored_ = v6;
  sync_->announce("6");
  EXPECT_EQ(apiReads_, 2) << "the API server was asked instead";
  EXPECT_EQ(sync_->version(), "6");
  EXPECT_EQ(table_.snapshot()->ownerOf(7)->pod, "counter-1");
  EXPECT_EQ(sync_->stats().deltas, 0u);
}

TEST_F(MapSyncTest, AManagerBehindTheWatchSendsTheReaderToTheApi) {
  sync_->announce("5");
  const sharding::ShardMap v6 =
      versioned(makeMap(10, 2, {{"counter-0", "1-5"}, {"counter-1", "6-10"}}), "6");
  const sharding::ShardMap v7 = versioned(makeMap(10, 3, {{"counter-1", "1-10"}}), "7");
  script_->answers.push_back(changes(stored_, v6, /*wantKnown=*/false));
  stored_ = v7;
  sync_->announce("7");
  EXPECT_EQ(apiReads_, 2);
  EXPECT_EQ(sync_->version(), "7");
  EXPECT_EQ(epochSeen(), 3);
}

TEST_F(MapSyncTest, AReadThatFailsEverywhereIsRetriedWithBackoffAndJitter) {
  apiDown();
  sync_->announce("5");
  EXPECT_EQ(apiReads_, 1);
  EXPECT_EQ(sync_->version(), "");
  scheduler_.advance(499ms);
  EXPECT_EQ(apiReads_, 1) << "not before half the first backoff (1 s)";
  scheduler_.advance(501ms);
  EXPECT_EQ(apiReads_, 2) << "within the first backoff";
  scheduler_.advance(2s);
  EXPECT_EQ(apiReads_, 3) << "then within 2 s";
  transport_.setHandler([this](const http::Request& r) {
    ++apiReads_;
    EXPECT_NE(r.target.find("resourceVersion=5"), std::string::npos)
        << "at least the announced version, from the cache: " << r.target;
    return std::optional<StatusOr<http::Response>>(
        kube::testing::jsonResponse(200, sharding::toJson(stored_).dump()));
  });
  scheduler_.advance(4s);
  EXPECT_EQ(sync_->version(), "5");
  scheduler_.advance(60s);
  EXPECT_EQ(apiReads_, 4) << "no read once the version is held";
}

// A pod that took the leader's address (it died, its IP was given to another pod) answers
// reads: what it says is not taken, and the sidecar reads the API server.
TEST_F(MapSyncTest, AnAnswerNotSignedByTheOperatorIsNotTaken) {
  sync_->announce("5");
  ASSERT_TRUE(registry_.owns(7));
  const sharding::ShardMap v5 = stored_;
  stored_ = versioned(makeMap(10, 2, {{"counter-1", "1-10"}}), "6");  // the revocation
  const sharding::ShardMap forged =
      versioned(makeMap(10, 1000000, {{"counter-0", "1-10"}, {"counter-1", ""}}), "6");
  http::Response answer = changes(v5, forged);
  answer.headers.set("Kshard-Manager-Authorization", "Bearer forged");
  script_->answers.push_back(answer);
  sync_->announce("6");
  EXPECT_EQ(apiReads_, 2);
  EXPECT_EQ(epochSeen(), 2);
  EXPECT_EQ(table_.snapshot()->ownerOf(7)->pod, "counter-1");
  EXPECT_FALSE(registry_.owns(7));
}

TEST_F(MapSyncTest, AMalformedAnswerSendsTheReaderToTheApi) {
  sync_->announce("5");
  stored_ = versioned(makeMap(10, 2, {{"counter-1", "1-10"}}), "6");
  for (const char* body : {R"({"resourceVersion":6,"digest":"x","wantKnown":true})",
                           R"({"resourceVersion":"6","digest":"x","wantKnown":"yes"})",
                           R"({"resourceVersion":"6","digest":"x","wantKnown":true,"from":5,
                               "changes":[]})",
                           R"([1,2])", "not json"}) {
    script_->answers.push_back(signed_(testing::answer(200, body)));
  }
  for (int i = 0; i < 5; ++i) {
    stored_.metadata.resourceVersion = std::to_string(6 + i);
    sync_->announce(stored_.metadata.resourceVersion);
  }
  EXPECT_EQ(apiReads_, 6);
  EXPECT_EQ(sync_->version(), "10");
}

TEST_F(MapSyncTest, TheHeldVersionNeverGoesBackwards) {
  stored_ = versioned(makeMap(10, 3, {{"counter-0", "1-10"}, {"counter-1", ""}}), "7");
  sync_->announce("7");
  ASSERT_EQ(sync_->version(), "7");
  const sharding::ShardMap v7 = stored_;
  apiDown();
  // A manager behind the watch answers its older version: not taken.
  script_->answers.push_back(
      changes(v7, versioned(makeMap(10, 3, {{"counter-0", "1-10"}}), "6"), false));
  sync_->announce("8");
  EXPECT_EQ(sync_->version(), "7");
  EXPECT_EQ(table_.snapshot()->pods.size(), 2u);
  // One that knows the version but answers an older epoch: not taken either.
  script_->answers.push_back(
      changes(v7, versioned(makeMap(10, 2, {{"counter-0", "1-10"}}), "9"), true));
  sync_->announce("9");
  EXPECT_EQ(sync_->version(), "7");
  EXPECT_EQ(epochSeen(), 3);
}

TEST_F(MapSyncTest, ANewVersionIsReadAtOnceAfterEarlierFailures) {
  apiDown();
  sync_->announce("5");
  for (int i = 0; i < 6; ++i) scheduler_.advance(32s);
  const int failed = apiReads_;
  apiServesStored();
  stored_ = versioned(makeMap(10, 2, {{"counter-1", "1-10"}}), "6");
  sync_->announce("6");
  EXPECT_EQ(apiReads_, failed + 1) << "read at once, not after the backoff";
  EXPECT_EQ(sync_->version(), "6");
  scheduler_.advance(60s);
  EXPECT_EQ(apiReads_, failed + 1) << "the superseded retry does not read again";
}

// A revocation announced while a read fails is read as soon as that read ends, not after the
// backoff.
TEST_F(MapSyncTest, AnAnnouncementDuringAFailingReadIsReadAtOnce) {
  apiDown();
  sync_->announce("5");
  for (int i = 0; i < 6; ++i) scheduler_.advance(32s);
  transport_.setHandler([this](const http::Request&) {
    ++apiReads_;
    return std::optional<StatusOr<http::Response>>();  // parked: the read in flight
  });
  scheduler_.advance(32s);
  ASSERT_EQ(transport_.parked(), 1u);
  stored_ = versioned(makeMap(10, 2, {{"counter-1", "1-10"}}), "6");
  sync_->announce("6");
  const int before = apiReads_;
  apiServesStored();
  transport_.answer(unavailable("Too large resource version"));
  EXPECT_GT(apiReads_, before);
  EXPECT_EQ(sync_->version(), "6");
}

// The watch's resync announces a version older than the one a manager's answer brought: it is
// not read again, and the held map does not go back to it.
TEST_F(MapSyncTest, AResyncOfAnOlderVersionDoesNotGoBack) {
  stored_ = versioned(makeMap(10, 3, {{"counter-0", "1-10"}}), "5");
  sync_->announce("5");
  const sharding::ShardMap v5 = stored_;
  const sharding::ShardMap v7 =
      versioned(makeMap(10, 3, {{"counter-0", "1-10"}, {"counter-1", ""}}), "7");
  script_->answers.push_back(changes(v5, v7, /*wantKnown=*/true));
  sync_->announce("6");
  ASSERT_EQ(sync_->version(), "7");
  ASSERT_EQ(table_.snapshot()->pods.size(), 2u);
  stored_ = versioned(makeMap(10, 3, {{"counter-0", "1-10"}}), "6");
  const int before = apiReads_;
  sync_->announce("6");  // the resync; the manager is unreachable now
  EXPECT_EQ(apiReads_, before);
  EXPECT_EQ(sync_->version(), "7");
  EXPECT_EQ(table_.snapshot()->pods.size(), 2u);
}

}  // namespace
}  // namespace kshard::sidecar

namespace kshard::sidecar {
namespace {

// A map too large for one object: the API server's ShardMap names segments, which the sidecar
// reads too, from etcd when the cache does not have one yet, and checks against their digests.
TEST_F(MapSyncTest, ASegmentedMapIsReadWholeFromTheApiServer) {
  const sharding::SegmentLimits limits{.inlineBytes = 4096, .segmentBytes = 2048};
  sharding::ShardMap large =
      makeMap(3000, 4, {{"counter-0", "1-1000"}, {"counter-1", "1001-3000"}});
  for (int i = 2; i < 300; ++i) {
    large.status.pods.push_back({"counter-" + std::to_string(i), "uid-" + std::to_string(i),
                                 "10.0.0." + std::to_string(i) + ":7101", "v1", 0, "", {}});
  }
  large.metadata.uid = "map-uid";
  // What the API server stores: the stub, and the segments by name; one of them (the second)
  // is not in the cache yet, or was tampered with.
  json stub;
  std::map<std::string, std::string> segments;
  std::string lagging;
  bool tamper = false;
  const auto store = [&](const sharding::ShardMap& m) {
    auto split = sharding::splitStatus(sharding::toJson(m), limits);
    ASSERT_TRUE(split.ok());
    ASSERT_GT(split->segments.size(), 3u);
    stub = split->object;
    for (const auto& s : split->segments) segments[s.ref.name] = s.data;
    lagging = split->segments[1].ref.name;
  };
  int cacheMisses = 0;
  transport_.setHandler([&](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
    ++apiReads_;
    const std::string path = r.target.substr(0, r.target.find('?'));
    if (path.ends_with("/shardmaps/counter")) {
      return kube::testing::jsonResponse(200, stub.dump());
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    if (name == lagging && r.target.find("resourceVersion=0") != std::string::npos) {
      ++cacheMisses;
      return kube::testing::jsonResponse(404, R"({"kind":"Status","reason":"NotFound"})");
    }
    std::string data = segments.at(name);
    if (name == lagging && tamper) data[data.find("10.0.0.") + 7] = '7';
    return kube::testing::jsonResponse(200, json{{"kind", "ShardMapSegment"}, {"data", data}}.dump());
  });

  store(versioned(large, "9"));
  sync_->announce("9");
  EXPECT_EQ(cacheMisses, 1);
  EXPECT_EQ(sync_->version(), "9");
  EXPECT_EQ(epochSeen(), 4);
  ASSERT_NE(table_.snapshot()->ownerOf(2000), nullptr);
  EXPECT_EQ(table_.snapshot()->ownerOf(2000)->pod, "counter-1");

  // A segment whose data does not match the status's digest: the version is not taken.
  sharding::ShardMap next = versioned(large, "10");
  next.status.epoch = 5;
  store(next);
  tamper = true;
  sync_->announce("10");
  EXPECT_EQ(sync_->version(), "9");
  EXPECT_EQ(epochSeen(), 4);
}

}  // namespace
}  // namespace kshard::sidecar
