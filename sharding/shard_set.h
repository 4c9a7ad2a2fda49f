// ShardSet: a set of shard ids, and its compact range form "1-120,151-180".
//
// Shard sets travel in the range form on the wire (assign/unassign, status.assignments,
// status.unassigned), so a map of 100,000 shards stays small. The canonical form lists ranges in
// ascending order, merges touching ranges ("1-3,4" becomes "1-4"), writes a single shard as "7",
// and writes the empty set as "". Parsing accepts parts in any order, as long as they do not
// overlap; everything else (out of 1..N, reversed ranges, empty parts, signs, spaces, garbage) is
// an InvalidArgument error naming the offending part.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sharding/shard_id.h"

namespace kshard::sharding {

// A closed interval first..last of shard ids, first <= last.
struct ShardRange {
  ShardId first = 0;
  ShardId last = 0;
  friend bool operator==(const ShardRange&, const ShardRange&) = default;
};

class ShardSet {
 public:
  ShardSet() = default;

  // Parses the range form; every shard must lie in 1..shardCount.
  [[nodiscard]] static StatusOr<ShardSet> parse(std::string_view text, std::int32_t shardCount);

  // The set of the given shards (any order, duplicates allowed).
  static ShardSet of(std::vector<ShardId> shards);

  // Adds `shard`. Precondition: it is greater than every shard already in the set (building a
  // set in ascending order is O(1) per shard).
  void append(ShardId shard);

  bool contains(ShardId shard) const;
  bool empty() const { return ranges_.empty(); }
  // Number of shards (not of ranges).
  std::int64_t size() const;
  // Sorted, disjoint, non-touching ranges.
  const std::vector<ShardRange>& ranges() const { return ranges_; }

  // Canonical range form.
  std::string toString() const;

  // Calls f(ShardId) for each shard in ascending order.
  template <typename F>
  void forEach(F&& f) const {
    for (const ShardRange& r : ranges_) {
      for (ShardId s = r.first; s <= r.last; ++s) f(s);
    }
  }

  friend bool operator==(const ShardSet&, const ShardSet&) = default;

 private:
  std::vector<ShardRange> ranges_;
};

}  // namespace kshard::sharding
