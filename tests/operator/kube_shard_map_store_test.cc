// KubeShardMapStore against the in-memory API server: a large status goes into segments written
// before the status that names them; reads put it back together; segments no stored version
// names are deleted after the grace period, and never one that a stored version names.
#include "operator/kube_shard_map_store.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "base/scheduler.h"
#include "sharding/shard_map_json.h"
#include "tests/kube/fake_api_server.h"
#include "tests/support/large_map.h"

namespace kshard::manager {
namespace {

using nlohmann::json;
using sharding::ShardMap;

constexpr sharding::SegmentLimits kSmall{.inlineBytes = 16 * 1024, .segmentBytes = 8 * 1024};
const kube::ResourceRef& kSegments = kube::resources::kShardMapSegments;

class KubeShardMapStoreTest : public ::testing::Test {
 protected:
  KubeShardMapStoreTest() {
    SeededRandom r(5);
    ShardMap map = testing::balancedMap(3000, 300, r);
    map.status = {};  // created with no status, as a user creates it
    json created = api_.put(kShardMapResource, sharding::toJson(map));
    auto decoded = sharding::shardMapFromJson(created);
    EXPECT_TRUE(decoded.ok());
    created_ = *decoded;
  }

  // The balanced status on top of the stored object `base`.
  ShardMap next(const ShardMap& base, std::uint64_t seed) {
    SeededRandom r(seed);
    ShardMap m = testing::balancedMap(3000, 300, r);
    m.metadata = base.metadata;
    return m;
  }

  StatusOr<ShardMap> run(const std::function<void(ShardMapStore::Callback)>& call) {
    std::optional<StatusOr<ShardMap>> out;
    call([&](StatusOr<ShardMap> r) { out = std::move(r); });
    scheduler_.runDue();
    EXPECT_TRUE(out.has_value()) << "the store never answered";
    return out ? *std::move(out) : StatusOr<ShardMap>(internalError("unanswered"));
  }
  StatusOr<ShardMap> write(const ShardMap& m) {
    return run([&](auto done) { store_.writeStatus(m, done); });
  }
  StatusOr<ShardMap> load() {
    return run([&](auto done) { store_.load({"demo", "counter"}, done); });
  }
  std::set<std::string> segmentNames() const {
    std::set<std::string> out;
    for (const json& s : api_.list(kSegments, "demo")) out.insert(s["metadata"]["name"]);
    return out;
  }
  std::set<std::string> named() const {
    std::set<std::string> out;
    auto stored = api_.get(kShardMapResource, "demo", "counter");
    for (const json& ref : stored->at("status").value("segments", json::array())) {
      out.insert(ref["name"].get<std::string>());
    }
    return out;
  }
  void passGrace() { scheduler_.advance(KubeShardMapStore::kSegmentGrace + std::chrono::seconds(1)); }

  Logger quiet_{"t", LogLevel::kError, [](std::string_view) {}};
  ManualScheduler scheduler_;
  SeededRandom random_{1};
  kube::testing::FakeApiServer api_{scheduler_.clock()};
  kube::Client client_{api_, scheduler_, random_, quiet_, {.maxRetries = 0}};
  KubeShardMapStore store_{client_, scheduler_, quiet_, kSmall};
  ShardMap created_;
};

TEST_F(KubeShardMapStoreTest, ALargeStatusIsStoredInSegmentsAndReadBackWhole) {
  const ShardMap want = next(created_, 9);
  auto stored = write(want);
  ASSERT_TRUE(stored.ok()) << stored.status().toString();
  EXPECT_EQ(stored->status, want.status);
  EXPECT_NE(stored->metadata.resourceVersion, created_.metadata.resourceVersion);
  // The stored object is a stub under the inline limit, naming segments that all exist.
  auto object = api_.get(kShardMapResource, "demo", "counter");
  ASSERT_TRUE(object.has_value());
  EXPECT_LE(object->dump().size(), kSmall.inlineBytes + 4096);
  EXPECT_EQ(object->at("status").at("pods"), json::array());
  EXPECT_GT(named().size(), 10u);
  EXPECT_EQ(named(), segmentNames());
  auto loaded = load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(loaded->status, want.status);
  EXPECT_EQ(loaded->metadata.resourceVersion, stored->metadata.resourceVersion);
}

TEST_F(KubeShardMapStoreTest, SegmentsAreCreatedBeforeTheStatusThatNamesThem) {
  std::vector<std::string> order;
  api_.intercept([&](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
    if (r.method == http::Method::kPost) order.push_back("segment");
    if (r.method == http::Method::kPut && r.target.find("dryRun") == std::string::npos) {
      order.push_back("status");
    }
    return std::nullopt;
  });
  ASSERT_TRUE(write(next(created_, 9)).ok());
  ASSERT_GT(order.size(), 2u);
  EXPECT_EQ(order.back(), "status");
  EXPECT_EQ(std::count(order.begin(), order.end(), "status"), 1);
}

// A CRD from before segments prunes status.segments: the first segmented write is a dry run,
// and a status that would lose its segments is never stored.
TEST_F(KubeShardMapStoreTest, ACrdThatWouldDropTheSegmentsStopsTheWriteBeforeIt) {
  int dryRuns = 0;
  api_.intercept([&](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
    if (r.method != http::Method::kPut || r.target.find("dryRun=All") == std::string::npos) {
      return std::nullopt;
    }
    ++dryRuns;
    json pruned = json::parse(r.body);
    pruned["status"].erase("segments");
    return kube::testing::jsonResponse(200, pruned.dump());
  });
  const std::string before = api_.get(kShardMapResource, "demo", "counter")->dump();
  auto refused = write(next(created_, 9));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("crds/"), std::string::npos)
      << refused.status().toString();
  EXPECT_EQ(dryRuns, 1);
  EXPECT_EQ(api_.get(kShardMapResource, "demo", "counter")->dump(), before);
  // Once the CRD is right, the write goes through.
  api_.intercept(nullptr);
  ASSERT_TRUE(load().ok());
  auto stored = write(next(created_, 9));
  ASSERT_TRUE(stored.ok()) << stored.status().toString();
  auto again = write(next(*stored, 10));
  ASSERT_TRUE(again.ok());
  passGrace();
  EXPECT_EQ(segmentNames(), named());
}

// The CRD rolled back after the dry run: the stored stub lost its segments, and every reader
// refuses it (its one assignment names a pod no status lists) instead of taking an empty map.
TEST_F(KubeShardMapStoreTest, AStubThatLostItsSegmentsFailsClosed) {
  auto first = write(next(created_, 9));
  ASSERT_TRUE(first.ok());
  api_.intercept([&](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
    if (r.method != http::Method::kPut || r.target.find("dryRun") != std::string::npos) {
      return std::nullopt;
    }
    json pruned = json::parse(r.body);
    pruned["status"].erase("segments");
    return kube::testing::jsonResponse(200, api_.put(kShardMapResource, pruned).dump());
  });
  EXPECT_EQ(write(next(*first, 10)).status().code(), StatusCode::kFailedPrecondition);
  api_.intercept(nullptr);
  auto loaded = load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(sharding::isSegmentedHead(loaded->status));
  EXPECT_FALSE(sharding::shardTableFromStatus(loaded->status, loaded->spec.shards).ok());
}

TEST_F(KubeShardMapStoreTest, ReplacedSegmentsGoAfterTheGraceAndNamedOnesStay) {
  auto first = write(next(created_, 9));
  ASSERT_TRUE(first.ok());
  const std::set<std::string> before = named();
  auto second = write(next(*first, 10));
  ASSERT_TRUE(second.ok());
  const std::set<std::string> after = named();
  // Within the grace a reader of the first version can still finish.
  EXPECT_EQ(segmentNames().size(), before.size() + after.size());
  passGrace();
  EXPECT_EQ(segmentNames(), after);
  auto loaded = load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(loaded->status, second->status);
}

TEST_F(KubeShardMapStoreTest, UnchangedSegmentsAreNotWrittenAgain) {
  auto first = write(next(created_, 9));
  ASSERT_TRUE(first.ok());
  ShardMap changed = *first;
  changed.status.pods.back().version = "1.4.3";  // the last segment only
  int posts = 0;
  api_.intercept([&](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
    if (r.method == http::Method::kPost) ++posts;
    return std::nullopt;
  });
  auto second = write(changed);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(posts, 1);
  passGrace();
  EXPECT_EQ(segmentNames(), named());
}

TEST_F(KubeShardMapStoreTest, AConflictWritesNothingAReaderTakesAndItsSegmentsAreCollected) {
  auto first = write(next(created_, 9));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(load().ok());  // the map's segments are listed now, before the refused write
  // Someone else writes first: this replica's write against the old version is refused.
  ShardMap other = *first;
  other.status.observedGeneration = 7;
  ASSERT_TRUE(write(other).ok());
  const std::set<std::string> current = named();
  ShardMap stale = next(*first, 11);
  auto refused = write(stale);
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict);
  EXPECT_EQ(named(), current);
  EXPECT_GT(segmentNames().size(), current.size());
  // Its segments are garbage once a later version is stored without them.
  auto fresh = load();
  ASSERT_TRUE(fresh.ok());
  ShardMap again = next(*fresh, 12);
  ASSERT_TRUE(write(again).ok());
  passGrace();
  EXPECT_EQ(segmentNames(), named());
  auto loaded = load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->status, again.status);
}

TEST_F(KubeShardMapStoreTest, ASegmentMissingOrTamperedIsAnErrorNeverAWrongMap) {
  ASSERT_TRUE(write(next(created_, 9)).ok());
  const std::string victim = *named().begin();
  json segment = *api_.get(kSegments, "demo", victim);
  std::string data = segment["data"];
  data[data.find("10.244.") + 3] = '9';
  segment["data"] = data;
  api_.put(kSegments, segment);
  auto tampered = load();
  EXPECT_EQ(tampered.status().code(), StatusCode::kFailedPrecondition)
      << tampered.status().toString();
  api_.remove(kSegments, "demo", victim);
  auto missing = load();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().toString();
}

TEST_F(KubeShardMapStoreTest, ASegmentNameTakenByOtherDataIsReplaced) {
  // A write that will be made again: a tenant got in first under its segments' names.
  const ShardMap want = next(created_, 9);
  auto split = sharding::splitStatus(sharding::toJson(want), kSmall);
  ASSERT_TRUE(split.ok());
  sharding::Segment squatter = split->segments[0];
  squatter.data = R"({"pods":[]})";
  api_.put(kSegments, sharding::segmentObject(split->object, squatter));
  auto stored = write(want);
  ASSERT_TRUE(stored.ok()) << stored.status().toString();
  auto loaded = load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(loaded->status, want.status);
}

TEST_F(KubeShardMapStoreTest, SegmentsLeftByAnEarlierLeaderAreCollectedAfterTheNextWrite) {
  auto first = write(next(created_, 9));
  ASSERT_TRUE(first.ok());
  // A leader that died between creating its segments and naming them.
  sharding::Segment orphan{{"counter-sorphan", "x"}, R"({"pods":[]})"};
  api_.put(kSegments, sharding::segmentObject(sharding::toJson(*first), orphan));
  KubeShardMapStore successor{client_, scheduler_, quiet_, kSmall};
  std::optional<StatusOr<ShardMap>> loaded;
  successor.load({"demo", "counter"}, [&](StatusOr<ShardMap> r) { loaded = std::move(r); });
  scheduler_.runDue();
  ASSERT_TRUE(loaded && loaded->ok());
  std::optional<StatusOr<ShardMap>> stored;
  successor.writeStatus(next(**loaded, 13), [&](StatusOr<ShardMap> r) { stored = std::move(r); });
  scheduler_.runDue();
  ASSERT_TRUE(stored && stored->ok());
  passGrace();
  EXPECT_EQ(segmentNames(), named());
}

TEST_F(KubeShardMapStoreTest, AMapThatShrinksGoesBackInlineAndItsSegmentsGo) {
  ASSERT_TRUE(write(next(created_, 9)).ok());
  auto loaded = load();
  ASSERT_TRUE(loaded.ok());
  ShardMap small = *loaded;
  small.status.pods.resize(2);
  small.status.assignments.clear();
  small.status.unassigned = {};
  auto stored = write(small);
  ASSERT_TRUE(stored.ok()) << stored.status().toString();
  EXPECT_TRUE(named().empty());
  passGrace();
  EXPECT_TRUE(segmentNames().empty());
  auto again = load();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, small.status);
}

}  // namespace
}  // namespace kshard::manager
