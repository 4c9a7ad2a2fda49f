// Shard ids: which shard an entity belongs to.
//
// shardId(entityId) = abs(h % N) + 1, where h is Java's String.hashCode of the id (31 * h + c over
// the UTF-16 code units, 32-bit two's-complement wrap-around) and `%` keeps the sign of h. This is
// the formula of Shardcake and of Akka Cluster Sharding's default extractor, so an entity lands on
// the same shard in kshard as in those systems. Every sidecar must compute the same id for the same
// entity, so this formula is part of the wire contract and must never change.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace kshard::sharding {

// A shard, 1..N where N is the ShardMap's spec.shards.
using ShardId = std::int32_t;

// Limits on spec.shards (DESIGN.md): at least one shard, at most 100,000.
inline constexpr std::int32_t kMinShardCount = 1;
inline constexpr std::int32_t kMaxShardCount = 100000;

// Java's String.hashCode of `utf8` taken as UTF-16 (astral code points count as two units).
// Entity ids arrive as UTF-8 from the network: malformed UTF-8 is an InvalidArgument error naming
// the byte offset, never a crash.
[[nodiscard]] StatusOr<std::int32_t> javaStringHashCode(std::string_view utf8);

// abs(hash % shardCount) + 1. Precondition: shardCount >= 1. Defined for every hash, including
// INT32_MIN (|INT32_MIN % N| < N, so nothing overflows).
ShardId shardIdOfHash(std::int32_t hash, std::int32_t shardCount);

// The shard of `entityId` among `shardCount` shards. InvalidArgument for malformed UTF-8 or a
// shardCount outside kMinShardCount..kMaxShardCount.
[[nodiscard]] StatusOr<ShardId> shardIdOf(std::string_view entityId, std::int32_t shardCount);

}  // namespace kshard::sharding
