#include "sharding/shard_set.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kshard::sharding {
namespace {

ShardSet parsed(std::string_view text, std::int32_t n = 300) {
  StatusOr<ShardSet> s = ShardSet::parse(text, n);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().toString();
  return s.valueOr(ShardSet());
}

std::string errorOf(std::string_view text, std::int32_t n = 300) {
  StatusOr<ShardSet> s = ShardSet::parse(text, n);
  EXPECT_FALSE(s.ok()) << text << " parsed";
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  return s.status().message();
}

std::vector<ShardId> members(const ShardSet& s) {
  std::vector<ShardId> out;
  s.forEach([&](ShardId id) { out.push_back(id); });
  return out;
}

TEST(ShardSetTest, ParsesTheDesignExample) {
  ShardSet s = parsed("1-120,151-180");
  EXPECT_EQ(s.size(), 150);
  EXPECT_TRUE(s.contains(1));
  EXPECT_TRUE(s.contains(120));
  EXPECT_FALSE(s.contains(121));
  EXPECT_FALSE(s.contains(150));
  EXPECT_TRUE(s.contains(151));
  EXPECT_TRUE(s.contains(180));
  EXPECT_FALSE(s.contains(181));
  EXPECT_EQ(s.toString(), "1-120,151-180");
}

TEST(ShardSetTest, EmptyStringIsTheEmptySet) {
  ShardSet s = parsed("");
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.toString(), "");
}

TEST(ShardSetTest, CanonicalFormIsSortedAndMerged) {
  EXPECT_EQ(parsed("7").toString(), "7");
  EXPECT_EQ(parsed("5,1-3").toString(), "1-3,5");
  EXPECT_EQ(parsed("1-3,4").toString(), "1-4");
  EXPECT_EQ(parsed("4,3,2,1").toString(), "1-4");
  EXPECT_EQ(parsed("10-20,1-9,21").toString(), "1-21");
  EXPECT_EQ(parsed("3-3").toString(), "3");
  EXPECT_EQ(parsed("1,3,5").toString(), "1,3,5");
  EXPECT_EQ(parsed("1-300").toString(), "1-300");
}

TEST(ShardSetTest, RejectsOverlapsNamingBothParts) {
  EXPECT_EQ(errorOf("1-120,100"), "part \"100\" overlaps part \"1-120\"");
  EXPECT_EQ(errorOf("5,5"), "part \"5\" overlaps part \"5\"");
  EXPECT_EQ(errorOf("10-20,1-10"), "part \"10-20\" overlaps part \"1-10\"");
}

TEST(ShardSetTest, RejectsShardsOutsideOneToN) {
  EXPECT_EQ(errorOf("0"), "part \"0\" is outside 1..300");
  EXPECT_EQ(errorOf("1-301"), "part \"1-301\" is outside 1..300");
  EXPECT_EQ(errorOf("99999999999999999999999"),
            "part \"99999999999999999999999\" is outside 1..300");
  EXPECT_EQ(errorOf("4", 3), "part \"4\" is outside 1..3");
}

TEST(ShardSetTest, RejectsReversedRanges) {
  EXPECT_EQ(errorOf("1-3,9-5"), "part \"9-5\" is a reversed range");
}

TEST(ShardSetTest, RejectsGarbageNamingThePart) {
  EXPECT_EQ(errorOf("1-3,x"), "part \"x\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf("-3"), "part \"-3\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf("3-"), "part \"3-\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf("1--3"), "part \"1--3\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf("1-2-3"), "part \"1-2-3\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf(" 1"), "part \" 1\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf("+1"), "part \"+1\" is not a shard or a range like \"1-10\"");
  EXPECT_EQ(errorOf("1,,2"), "part 2 is empty");
  EXPECT_EQ(errorOf("1,"), "part 2 is empty");
  EXPECT_EQ(errorOf(","), "part 1 is empty");
}

TEST(ShardSetTest, OfSortsAndDeduplicates) {
  ShardSet s = ShardSet::of({9, 3, 4, 3, 5, 1});
  EXPECT_EQ(s.toString(), "1,3-5,9");
  EXPECT_EQ(members(s), (std::vector<ShardId>{1, 3, 4, 5, 9}));
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.ranges().size(), 3u);
}

TEST(ShardSetTest, AppendMergesTouchingShards) {
  ShardSet s;
  for (ShardId id : {1, 2, 3, 7, 8, 10}) s.append(id);
  EXPECT_EQ(s.toString(), "1-3,7-8,10");
  EXPECT_EQ(s, parsed("10,7-8,1-3"));
}

TEST(ShardSetTest, RoundTripsThroughTheRangeForm) {
  std::vector<ShardId> ids;
  for (ShardId id = 1; id <= 100000; id += (id % 7 == 0 ? 5 : 1)) ids.push_back(id);
  const ShardSet s = ShardSet::of(ids);
  StatusOr<ShardSet> back = ShardSet::parse(s.toString(), 100000);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(members(*back), ids);
}

}  // namespace
}  // namespace kshard::sharding
