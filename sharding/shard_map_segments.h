// A ShardMap status too large for one object: its bulk in ShardMapSegment objects.
//
// At 100,000 shards over 10,000 pods a status is 2.4 to 3.5 MB, beyond what the API server stores
// in one object. A status that serialises to more than SegmentLimits::inlineBytes keeps its
// counts, epoch, manager, conditions and load, and moves its pods, assignments and unassigned
// shards, in order, into segments of at most SegmentLimits::segmentBytes each
// (docs/decisions/0018-segmented-status.md):
//
//   status.segments: [{"name": "counter-s6f1c...", "sha256": "..."}, ...]
//   ShardMapSegment counter-s6f1c...: data: "{\"pods\":[...],\"assignments\":[...]}"
//
// Segments are immutable: a segment is written once, and the status, which only the operator
// writes, carries each one's SHA-256. The operator
// creates the segments before the status that names them, so the status write stays the single
// commit point of a version; a reader checks every segment against its digest and never mixes
// versions. Concatenating the segments' pods and assignments, and joining their unassigned
// parts with ",", gives back the status exactly as it was before the split.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "sharding/shard_map.h"

namespace kshard::sharding {

inline constexpr char kSegmentKind[] = "ShardMapSegment";

// The stub of a segmented status fails closed in every decoder, old or new: besides
// status.segments it holds no pods and one assignment of every shard to this pod, which no
// status lists, so a ShardTable refuses it (an older operator or sidecar keeps its view, and
// never takes the stub for a map without pods). assembleStatus replaces it.
inline constexpr char kSegmentedPod[] = "kshard.io/segmented";

struct SegmentLimits {
  // A status up to this size (serialised) stays in the ShardMap object.
  std::size_t inlineBytes = 512 * 1024;
  // The data of one segment, at most. The JSON text of one pod or assignment is never cut: the
  // longest shard set of 100,000 shards is about 400 KB.
  std::size_t segmentBytes = 512 * 1024;
};

struct SegmentRef {
  std::string name;
  std::string sha256;  // of the data, 64 hex digits
  friend bool operator==(const SegmentRef&, const SegmentRef&) = default;
};

struct Segment {
  SegmentRef ref;
  std::string data;  // JSON text: {"pods": [...], "assignments": [...], "unassigned": "..."}
};

struct SplitStatus {
  nlohmann::json object;          // the ShardMap to write; status.segments names `segments`
  std::vector<Segment> segments;  // empty: the status is inline
};

// Splits `object`'s status when it is larger than limits.inlineBytes; otherwise answers it as it
// is. A status.segments already present is replaced. A segment whose data is that of one of
// `reuse` (the segments of the version being replaced) keeps its name; any other gets a new one,
// from the map's uid, the resourceVersion being replaced and the data, so a name once dropped
// from a status is never named again and can be deleted. InvalidArgument when one pod or
// assignment alone exceeds limits.segmentBytes.
[[nodiscard]] StatusOr<SplitStatus> splitStatus(nlohmann::json object,
                                                const SegmentLimits& limits = {},
                                                const std::vector<SegmentRef>& reuse = {});

// The segments a stored ShardMap names, in order; empty when its status is inline.
// InvalidArgument when status.segments is malformed.
[[nodiscard]] StatusOr<std::vector<SegmentRef>> segmentRefs(const nlohmann::json& object);

// `stub` (a stored ShardMap naming segments) with its status made whole again from `data`, the
// data of each segment in the order segmentRefs names them (an inline object, with no data, is
// answered as it is). FailedPrecondition when a segment
// does not match its digest; InvalidArgument when its data is not a segment's.
[[nodiscard]] StatusOr<nlohmann::json> assembleStatus(nlohmann::json stub,
                                                      const std::vector<std::string>& data);

// The ShardMapSegment object that stores `segment` for the ShardMap `map` (its namespace, a
// kshard.io/shard-map label, and an owner reference, so segments go when the map goes).
nlohmann::json segmentObject(const nlohmann::json& map, const Segment& segment);
// The data of a ShardMapSegment object. InvalidArgument when it has none.
[[nodiscard]] StatusOr<std::string> segmentData(const nlohmann::json& segmentObject);

// Reads what a stored ShardMap names: `fetch(name, done)` answers one segment's data, on any
// thread. `done` gets the whole object (at once when it is inline), or the first error.
using SegmentFetch = std::function<void(const std::string& name,
                                        std::function<void(StatusOr<std::string>)> done)>;
void completeShardMap(nlohmann::json object, const SegmentFetch& fetch,
                      std::function<void(StatusOr<nlohmann::json>)> done);

// `object` without status.segments: what a reader that needs no pods or assignments (the
// operator's followers, the webhook) decodes. shardMapFromJson refuses a segmented object.
nlohmann::json withoutSegments(nlohmann::json object);
// Whether `status` is the head of a segmented status (decoded withoutSegments): it has no pods
// and must not be served as the map.
bool isSegmentedHead(const ShardMapStatus& status);

}  // namespace kshard::sharding
