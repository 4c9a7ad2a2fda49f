// SHA-256 of bytes, as 64 lower-case hex digits: the content address of a ShardMap segment
// (sharding/shard_map_segments.h), where a digest must also hold against a tenant who crafts
// content on purpose.
#pragma once

#include <string>
#include <string_view>

namespace kshard {

std::string sha256Hex(std::string_view bytes);

}  // namespace kshard
