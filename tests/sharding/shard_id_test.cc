#include "sharding/shard_id.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace kshard::sharding {
namespace {

// Expected values were computed with Java 17 (String.hashCode, Math.abs(h % n) + 1), not with
// this code.

std::int32_t hashOf(std::string_view id) {
  StatusOr<std::int32_t> h = javaStringHashCode(id);
  EXPECT_TRUE(h.ok()) << h.status().toString();
  return h.valueOr(0);
}

ShardId shardOf(std::string_view id, std::int32_t n) {
  StatusOr<ShardId> s = shardIdOf(id, n);
  EXPECT_TRUE(s.ok()) << s.status().toString();
  return s.valueOr(0);
}

TEST(ShardIdTest, MatchesJavaHashCodeForAsciiIds) {
  EXPECT_EQ(hashOf(""), 0);
  EXPECT_EQ(hashOf("a"), 97);
  EXPECT_EQ(hashOf("order:12345"), 851011847);
}

TEST(ShardIdTest, DesignExamplesWith300Shards) {
  EXPECT_EQ(shardOf("a", 300), 98);
  EXPECT_EQ(shardOf("guild1", 300), 95);
}

TEST(ShardIdTest, NegativeHashKeepsTheSignOfTheRemainderThenTakesAbs) {
  EXPECT_EQ(hashOf("guild1"), -1234877794);
  EXPECT_EQ(hashOf("user-42"), -147182656);
  EXPECT_EQ(hashOf("zzzzzzzz"), -1910022912);  // wraps around several times
  EXPECT_EQ(shardOf("user-42", 300), 257);
  EXPECT_EQ(shardOf("guild1", 1000), 795);
  EXPECT_EQ(shardOf("zzzzzzzz", 300), 13);
}

TEST(ShardIdTest, HashEqualToIntMinIsHandled) {
  EXPECT_EQ(hashOf("polygenelubricants"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(hashOf("GydZG_"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(shardOf("polygenelubricants", 300), 249);
  EXPECT_EQ(shardOf("polygenelubricants", 1000), 649);
  EXPECT_EQ(shardOf("polygenelubricants", 7), 3);
  // Divisors of 2^31 leave remainder 0: shard 1, not an overflow.
  EXPECT_EQ(shardIdOfHash(std::numeric_limits<std::int32_t>::min(), 1024), 1);
  EXPECT_EQ(shardIdOfHash(std::numeric_limits<std::int32_t>::min(), 1), 1);
}

TEST(ShardIdTest, HashesUtf16CodeUnitsOfNonAsciiIds) {
  EXPECT_EQ(hashOf("\xC3\xA9t\xC3\xA9"), 227742);         // "été": BMP, two-byte UTF-8
  EXPECT_EQ(hashOf("\xE4\xB8\xAD\xE6\x96\x87"), 646394);  // "中文": three-byte UTF-8
  EXPECT_EQ(shardOf("\xC3\xA9t\xC3\xA9", 300), 43);
  EXPECT_EQ(shardOf("\xE4\xB8\xAD\xE6\x96\x87", 300), 195);
}

TEST(ShardIdTest, AstralCharactersCountAsSurrogatePairs) {
  EXPECT_EQ(hashOf("\xF0\x9F\x98\x80"), 1772899);  // U+1F600 = D83D DE00
  EXPECT_EQ(hashOf("emoji\xF0\x9F\x98\x80x"), 1217655151);
  EXPECT_EQ(shardOf("\xF0\x9F\x98\x80", 300), 200);
  EXPECT_EQ(shardOf("emoji\xF0\x9F\x98\x80x", 1000), 152);
}

TEST(ShardIdTest, EveryIdLandsInOneToN) {
  for (std::int32_t n : {1, 2, 3, 300, 100000}) {
    for (std::int32_t h : {0, 1, -1, 299, -299, 300, -300, std::numeric_limits<std::int32_t>::max(),
                           std::numeric_limits<std::int32_t>::min()}) {
      const ShardId s = shardIdOfHash(h, n);
      EXPECT_GE(s, 1) << "hash " << h << " n " << n;
      EXPECT_LE(s, n) << "hash " << h << " n " << n;
    }
  }
}

TEST(ShardIdTest, InvalidUtf8IsAnErrorNotACrash) {
  StatusOr<ShardId> s = shardIdOf("ab\xFF", 300);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "entity id: invalid UTF-8 at byte 2");
  EXPECT_FALSE(javaStringHashCode("\xED\xA0\x80").ok());  // a lone surrogate encoded in UTF-8
}

TEST(ShardIdTest, RejectsShardCountsOutsideTheSpecLimits) {
  EXPECT_EQ(shardIdOf("a", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shardIdOf("a", -5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shardIdOf("a", 100001).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shardOf("a", 100000), 98);
}

}  // namespace
}  // namespace kshard::sharding
