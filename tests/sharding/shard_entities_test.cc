#include "sharding/shard_entities.h"

#include <gtest/gtest.h>

#include "sharding/shard_map.h"

namespace kshard::sharding {
namespace {

using nlohmann::json;

ShardEntities record() {
  return {"counter", 17, 42, {{"consumer", "orders"}, {"consumer", "refunds"}}};
}

TEST(ShardEntitiesTest, ObjectIsNamedLabelledAndOwnedByItsMap) {
  const json o = shardEntitiesObject({"demo", "counter", "uid-1"}, record());
  EXPECT_EQ(o["kind"], "ShardEntities");
  EXPECT_EQ(o["apiVersion"], "kshard.io/v1alpha1");
  EXPECT_EQ(o["metadata"]["name"], "counter-17");
  EXPECT_EQ(o["metadata"]["namespace"], "demo");
  EXPECT_EQ(o["metadata"]["labels"][kShardMapLabel], "counter");
  EXPECT_EQ(o["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(o["metadata"]["ownerReferences"][0]["kind"], "ShardMap");
  EXPECT_FALSE(o["metadata"].contains("resourceVersion"));  // a create
  EXPECT_EQ(o["spec"]["epoch"], 42);
  EXPECT_EQ(o["spec"]["entities"][1]["id"], "refunds");
}

TEST(ShardEntitiesTest, UpdateCarriesTheVersionReadAndNoOwnerWithoutAUid) {
  const json o = shardEntitiesObject({"demo", "counter", ""}, record(), "812");
  EXPECT_EQ(o["metadata"]["resourceVersion"], "812");
  EXPECT_FALSE(o["metadata"].contains("ownerReferences"));
}

TEST(ShardEntitiesTest, RoundTrips) {
  auto back = shardEntitiesFromJson(shardEntitiesObject({"demo", "counter", "u"}, record()));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, record());
}

TEST(ShardEntitiesTest, DecodingSortsAndDropsDuplicates) {
  json o = shardEntitiesObject({"demo", "counter", "u"}, record());
  o["spec"]["entities"] = {
      {{"type", "b"}, {"id", "1"}}, {{"type", "a"}, {"id", "2"}}, {{"type", "b"}, {"id", "1"}}};
  auto back = shardEntitiesFromJson(o);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->entities, (std::vector<RememberedEntity>{{"a", "2"}, {"b", "1"}}));
}

TEST(ShardEntitiesTest, MalformedRecordsNameTheField) {
  json o = shardEntitiesObject({"demo", "counter", "u"}, record());
  o["spec"]["epoch"] = -1;
  EXPECT_EQ(shardEntitiesFromJson(o).status().code(), StatusCode::kInvalidArgument);
  o = shardEntitiesObject({"demo", "counter", "u"}, record());
  o["spec"]["entities"][0]["id"] = "";
  EXPECT_EQ(shardEntitiesFromJson(o).status().message(),
            "spec.entities[0]: type and id must not be empty");
  o.erase("spec");
  EXPECT_EQ(shardEntitiesFromJson(o).status().message(), "spec: is required");
  EXPECT_FALSE(shardEntitiesFromJson(json("text")).ok());
}

TEST(ShardEntitiesTest, LongMapNamesKeepADigestSoTheyNeverShareARecord) {
  const std::string a = std::string(199, 'a') + ".-x";
  const std::string b = std::string(199, 'a') + ".-y";
  const std::string na = shardEntitiesName(a, 100000);
  EXPECT_NE(na, shardEntitiesName(b, 100000));
  EXPECT_LE(na.size(), 253u);
  EXPECT_EQ(na.find(".-"), std::string::npos) << na;
  EXPECT_EQ(shardEntitiesName("counter", 3), "counter-3");
}

}  // namespace
}  // namespace kshard::sharding
