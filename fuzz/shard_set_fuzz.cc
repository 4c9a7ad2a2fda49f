// The range codec (sharding/shard_set.h): "1-120,151-180" in ShardMap status, assign and unassign
// bodies. Checks the parser against a reference reading of the documented grammar, and the round
// trip parse -> toString -> parse.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "sharding/shard_set.h"

namespace kshard::fuzz {
namespace {

using sharding::ShardId;
using sharding::ShardSet;

// The documented grammar, read independently of shard_set.cc: parts separated by ',', each
// "N" or "N-M" with N, M runs of ASCII digits in 1..count and N <= M, no shard in two parts.
// Gives the set as sorted, merged ranges (a sweep over the parts' boundaries), or nullopt when
// the text is not a valid set.
std::optional<std::vector<sharding::ShardRange>> referenceParse(std::string_view text,
                                                                std::int32_t count) {
  std::vector<sharding::ShardRange> out;
  if (text.empty()) return out;
  const auto number = [count](std::string_view digits, std::int64_t& value) {
    if (digits.empty()) return false;
    value = 0;
    for (const char c : digits) {
      if (c < '0' || c > '9') return false;
      value = std::min<std::int64_t>(value * 10 + (c - '0'), std::int64_t{count} + 1);
    }
    return value >= 1 && value <= count;
  };
  std::map<std::int64_t, int> delta;  // +1 where a part starts, -1 after it ends
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::size_t dash = part.find('-');
    std::int64_t first = 0;
    std::int64_t last = 0;
    if (dash == std::string_view::npos) {
      if (!number(part, first)) return std::nullopt;
      last = first;
    } else if (!number(part.substr(0, dash), first) || !number(part.substr(dash + 1), last) ||
               first > last) {
      return std::nullopt;
    }
    ++delta[first];
    --delta[last + 1];
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  int running = 0;
  for (const auto& [at, change] : delta) {
    const int before = running;
    running += change;
    if (running > 1) return std::nullopt;  // overlapping parts
    if (before == 0 && running == 1) out.push_back({static_cast<ShardId>(at), 0});
    if (before == 1 && running == 0) out.back().last = static_cast<ShardId>(at - 1);
  }
  return out;
}

}  // namespace

int fuzzOneShardSet(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  // Mostly small maps, where ranges collide; sometimes the largest allowed.
  const std::int32_t count =
      in.flag() ? static_cast<std::int32_t>(in.inRange(1, sharding::kMaxShardCount))
                : static_cast<std::int32_t>(in.inRange(1, 64));
  const std::string_view text = in.rest();

  const auto expected = referenceParse(text, count);
  StatusOr<ShardSet> parsed = ShardSet::parse(text, count);
  check(parsed.ok() == expected.has_value(),
        expected ? "ShardSet::parse rejects a set the grammar allows"
                 : "ShardSet::parse accepts a set the grammar forbids",
        std::string(text) + " / count " + std::to_string(count) +
            (parsed.ok() ? "" : " / " + parsed.status().message()));
  if (!parsed.ok()) {
    check(!parsed.status().message().empty(), "a parse error says what is wrong");
    return 0;
  }
  const ShardSet& set = *parsed;
  check(set.ranges() == *expected, "the set holds exactly the shards of its parts", text);

  // The ranges are sorted, disjoint, non-touching, inside 1..count; size and contains agree.
  std::int64_t total = 0;
  for (std::size_t i = 0; i < set.ranges().size(); ++i) {
    const auto& r = set.ranges()[i];
    check(r.first >= 1 && r.first <= r.last && r.last <= count, "ranges lie in 1..count", text);
    if (i > 0) check(set.ranges()[i - 1].last + 1 < r.first, "ranges are merged and ordered", text);
    total += r.last - r.first + 1;
    check(set.contains(r.first) && set.contains(r.last) && !set.contains(r.first - 1) &&
              !set.contains(r.last + 1),
          "contains() agrees with the ranges at their edges", text);
  }
  check(total == set.size(), "size() counts the shards", text);
  check(!set.contains(0) && !set.contains(count + 1), "nothing outside 1..count", text);

  // Round trip: the canonical form parses back to the same set and is a fixed point.
  const std::string canonical = set.toString();
  StatusOr<ShardSet> again = ShardSet::parse(canonical, count);
  check(again.ok() && *again == set, "parse(toString(s)) == s", text);
  check(again->toString() == canonical, "toString is canonical", canonical);
  check(canonical.size() <= text.size(), "the canonical form is never longer than a valid input",
        text);

  // Building the same set shard by shard gives an equal value (for sets cheap to list).
  if (set.size() > 4096) return 0;
  std::vector<ShardId> shards;
  set.forEach([&shards](ShardId s) { shards.push_back(s); });
  std::reverse(shards.begin(), shards.end());
  check(ShardSet::of(shards) == set, "ShardSet::of(shards of s) == s", text);
  return 0;
}

}  // namespace kshard::fuzz
