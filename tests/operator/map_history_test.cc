#include "operator/map_history.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sharding/json_delta.h"
#include "sharding/shard_map_json.h"

namespace kshard::manager {
namespace {

using nlohmann::json;

sharding::ShardMap version(int rv, int epoch) {
  sharding::ShardMap m;
  m.metadata.name = "counter";
  m.metadata.namespace_ = "demo";
  m.metadata.resourceVersion = std::to_string(rv);
  m.spec.shards = 100;
  m.status.epoch = epoch;
  for (int i = 0; i < 10; ++i) {
    m.status.pods.push_back({"p" + std::to_string(i), "uid" + std::to_string(i), "10.0.0.1:7101",
                             "1", 10, "inc", std::nullopt});
  }
  return m;
}

TEST(MapHistoryTest, AnswersChangesFromEveryKeptVersion) {
  MapHistory h(3);
  for (int rv = 1; rv <= 4; ++rv) h.record(version(rv, rv));
  EXPECT_FALSE(h.knows("1")) << "only three versions are kept";
  EXPECT_TRUE(h.knows("2"));
  EXPECT_EQ(h.currentVersion(), "4");
  const json current = sharding::toJson(version(4, 4));
  for (const std::string since : {"2", "3", "4"}) {
    const json body = json::parse(*h.answer(since, "4"));
    ASSERT_TRUE(body.contains("changes")) << body.dump();
    auto rebuilt = sharding::applyJsonDelta(sharding::toJson(version(std::stoi(since),
                                                                     std::stoi(since))),
                                            body["changes"]);
    ASSERT_TRUE(rebuilt.ok());
    EXPECT_EQ(*rebuilt, current);
    EXPECT_EQ(body["digest"], sharding::textDigest(current.dump()));
  }
  EXPECT_EQ(h.deltasComputed(), 2u) << "from 2 and from 3; none for the current version";
  EXPECT_EQ(h.answer("2", "4"), h.answer("2", "4")) << "one answer, shared by its readers";
  EXPECT_EQ(h.deltasComputed(), 2u) << "a delta is computed once";
  const json unknown = json::parse(*h.answer("1", "4"));
  EXPECT_FALSE(unknown.contains("changes")) << "version 1 is no longer kept";
  EXPECT_FALSE(unknown.contains("map"));
  EXPECT_EQ(json::parse(*h.answer("1", "9"))["wantKnown"], false);
}

// A version seen again (an informer lagging behind this replica's own write) is older than the
// current one: it does not become current, and no answer is older than a version it knows.
TEST(MapHistoryTest, AVersionSeenAgainDoesNotBecomeCurrent) {
  MapHistory h(4);
  h.record(version(5, 5));
  h.record(version(6, 6));
  h.record(version(7, 7));
  h.record(version(6, 6));
  EXPECT_EQ(h.currentVersion(), "7");
  const json body = json::parse(*h.answer("5", "7"));
  EXPECT_EQ(body["wantKnown"], true);
  EXPECT_EQ(body["resourceVersion"], "7");
  auto rebuilt = sharding::applyJsonDelta(sharding::toJson(version(5, 5)), body["changes"]);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_EQ(*rebuilt, sharding::toJson(version(7, 7)));
}

TEST(MapHistoryTest, ClearForgetsEveryVersion) {
  MapHistory h;
  h.record(version(1, 1));
  h.clear();
  EXPECT_TRUE(h.empty());
  EXPECT_FALSE(h.knows("1"));
  h.record(version(2, 2));
  EXPECT_FALSE(json::parse(*h.answer("1", "")).contains("changes"));
}

TEST(MapHistoryTest, KeepsTheCurrentVersionWhateverItsSize) {
  MapHistory h(16, 10);  // 10 bytes: less than any version
  h.record(version(1, 1));
  h.record(version(2, 2));
  EXPECT_FALSE(h.knows("1"));
  EXPECT_TRUE(h.knows("2"));
  EXPECT_TRUE(json::parse(*h.answer("2", "2")).contains("changes"));
}

}  // namespace
}  // namespace kshard::manager
