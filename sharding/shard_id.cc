#include "sharding/shard_id.h"

#include <string>

#include "base/utf8.h"

namespace kshard::sharding {

StatusOr<std::int32_t> javaStringHashCode(std::string_view utf8) {
  // Unsigned arithmetic wraps modulo 2^32 exactly as Java's int does, without the undefined
  // behaviour of signed overflow; the final conversion to int32 is modular since C++20.
  std::uint32_t h = 0;
  Status valid = forEachUtf16Unit(
      utf8, [&h](char16_t unit) { h = 31u * h + static_cast<std::uint32_t>(unit); });
  if (!valid.ok()) return valid;
  return static_cast<std::int32_t>(h);
}

ShardId shardIdOfHash(std::int32_t hash, std::int32_t shardCount) {
  // C++ `%` truncates toward zero like Java's, so the remainder has the sign of `hash`.
  const std::int32_t remainder = hash % shardCount;
  return (remainder < 0 ? -remainder : remainder) + 1;
}

StatusOr<ShardId> shardIdOf(std::string_view entityId, std::int32_t shardCount) {
  if (shardCount < kMinShardCount || shardCount > kMaxShardCount) {
    return invalidArgument("shard count " + std::to_string(shardCount) + " is outside " +
                           std::to_string(kMinShardCount) + ".." + std::to_string(kMaxShardCount));
  }
  StatusOr<std::int32_t> hash = javaStringHashCode(entityId);
  if (!hash.ok()) return hash.status().withContext("entity id");
  return shardIdOfHash(*hash, shardCount);
}

}  // namespace kshard::sharding
