#include "sharding/shard_set.h"

#include <algorithm>
#include <cassert>
#include <cstddef>

namespace kshard::sharding {
namespace {

struct ParsedPart {
  ShardRange range;
  std::string_view text;
};

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Parses a shard number: ASCII digits only, within 1..shardCount.
StatusOr<ShardId> parseShard(std::string_view digits, std::string_view part,
                             std::int32_t shardCount) {
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return invalidArgument("part " + quoted(part) + " is not a shard or a range like \"1-10\"");
  }
  std::int64_t value = 0;
  for (char c : digits) {
    value = value * 10 + (c - '0');
    // Stop early so a long run of digits cannot overflow; anything this big is out of range.
    if (value > shardCount) break;
  }
  if (value < 1 || value > shardCount) {
    return invalidArgument("part " + quoted(part) + " is outside 1.." + std::to_string(shardCount));
  }
  return static_cast<ShardId>(value);
}

StatusOr<ShardRange> parsePart(std::string_view part, std::int32_t shardCount) {
  const std::size_t dash = part.find('-');
  if (dash == std::string_view::npos) {
    StatusOr<ShardId> shard = parseShard(part, part, shardCount);
    if (!shard.ok()) return shard.status();
    return ShardRange{*shard, *shard};
  }
  StatusOr<ShardId> first = parseShard(part.substr(0, dash), part, shardCount);
  if (!first.ok()) return first.status();
  StatusOr<ShardId> last = parseShard(part.substr(dash + 1), part, shardCount);
  if (!last.ok()) return last.status();
  if (*first > *last) return invalidArgument("part " + quoted(part) + " is a reversed range");
  return ShardRange{*first, *last};
}

}  // namespace

StatusOr<ShardSet> ShardSet::parse(std::string_view text, std::int32_t shardCount) {
  ShardSet set;
  if (text.empty()) return set;
  std::vector<ParsedPart> parts;
  std::size_t index = 0;
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    ++index;
    if (part.empty()) return invalidArgument("part " + std::to_string(index) + " is empty");
    StatusOr<ShardRange> range = parsePart(part, shardCount);
    if (!range.ok()) return range.status();
    parts.push_back({*range, part});
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::sort(parts.begin(), parts.end(),
            [](const ParsedPart& a, const ParsedPart& b) { return a.range.first < b.range.first; });
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0 && parts[i].range.first <= parts[i - 1].range.last) {
      return invalidArgument("part " + quoted(parts[i].text) + " overlaps part " +
                             quoted(parts[i - 1].text));
    }
    const ShardRange& r = parts[i].range;
    if (!set.ranges_.empty() && set.ranges_.back().last + 1 == r.first) {
      set.ranges_.back().last = r.last;
    } else {
      set.ranges_.push_back(r);
    }
  }
  return set;
}

ShardSet ShardSet::of(std::vector<ShardId> shards) {
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  ShardSet set;
  for (ShardId s : shards) set.append(s);
  return set;
}

void ShardSet::append(ShardId shard) {
  assert((ranges_.empty() || shard > ranges_.back().last) && "ShardSet::append out of order");
  if (!ranges_.empty() && ranges_.back().last + 1 == shard) {
    ranges_.back().last = shard;
  } else {
    ranges_.push_back({shard, shard});
  }
}

bool ShardSet::contains(ShardId shard) const {
  // First range whose end is at or after `shard`.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), shard,
                             [](const ShardRange& r, ShardId s) { return r.last < s; });
  return it != ranges_.end() && it->first <= shard;
}

std::int64_t ShardSet::size() const {
  std::int64_t n = 0;
  for (const ShardRange& r : ranges_) n += static_cast<std::int64_t>(r.last) - r.first + 1;
  return n;
}

std::string ShardSet::toString() const {
  std::string out;
  for (const ShardRange& r : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.first);
    if (r.last != r.first) {
      out += '-';
      out += std::to_string(r.last);
    }
  }
  return out;
}

}  // namespace kshard::sharding
