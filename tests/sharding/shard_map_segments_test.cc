#include "sharding/shard_map_segments.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/sha256.h"
#include "sharding/shard_map_json.h"
#include "tests/support/large_map.h"

namespace kshard::sharding {
namespace {

using nlohmann::json;

// Small limits, so that a map of a few hundred pods is split into many segments.
constexpr SegmentLimits kSmall{.inlineBytes = 16 * 1024, .segmentBytes = 8 * 1024};

json largeMap(std::int32_t shards = 3000, std::int32_t pods = 300, std::uint64_t seed = 3) {
  SeededRandom r(seed);
  return toJson(testing::balancedMap(shards, pods, r));
}

std::vector<std::string> dataOf(const SplitStatus& split) {
  std::vector<std::string> out;
  for (const Segment& s : split.segments) out.push_back(s.data);
  return out;
}

TEST(ShardMapSegments, ASmallStatusStaysInline) {
  SeededRandom r(1);
  const json object = toJson(testing::balancedMap(300, 3, r));
  auto split = splitStatus(object);
  ASSERT_TRUE(split.ok()) << split.status().toString();
  EXPECT_TRUE(split->segments.empty());
  EXPECT_EQ(split->object, object);
  auto refs = segmentRefs(split->object);
  ASSERT_TRUE(refs.ok());
  EXPECT_TRUE(refs->empty());
  auto whole = assembleStatus(split->object, {});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, object);
}

TEST(ShardMapSegments, ALargeStatusSplitsIntoBoundedSegmentsAndAssemblesExactly) {
  const json object = largeMap();
  auto split = splitStatus(object, kSmall);
  ASSERT_TRUE(split.ok()) << split.status().toString();
  ASSERT_GT(split->segments.size(), 10u);
  // The stub keeps the counts, epoch and conditions, and nothing of the bulk.
  // The stub fails closed in any decoder: no pods, every shard given to a pod no status lists.
  const json& status = split->object["status"];
  EXPECT_EQ(status["pods"], json::array());
  ASSERT_EQ(status["assignments"].size(), 1u);
  EXPECT_EQ(status["assignments"][0]["pod"], kSegmentedPod);
  EXPECT_EQ(status["assignments"][0]["shards"], "1-3000");
  EXPECT_FALSE(status.contains("unassigned"));
  EXPECT_EQ(status["epoch"], object["status"]["epoch"]);
  EXPECT_LE(split->object.dump().size(), kSmall.inlineBytes);
  std::set<std::string> names;
  for (const Segment& s : split->segments) {
    EXPECT_LE(s.data.size(), kSmall.segmentBytes);
    EXPECT_EQ(s.ref.sha256, sha256Hex(s.data));
    EXPECT_TRUE(s.ref.name.starts_with("counter-s")) << s.ref.name;
    EXPECT_LE(s.ref.name.size(), 253u);
    names.insert(s.ref.name);
  }
  EXPECT_EQ(names.size(), split->segments.size());
  auto whole = assembleStatus(split->object, dataOf(*split));
  ASSERT_TRUE(whole.ok()) << whole.status().toString();
  EXPECT_EQ(*whole, object);
  // The stub alone is refused by the codec; the whole object decodes.
  EXPECT_EQ(shardMapFromJson(split->object).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(shardMapFromJson(*whole).ok());
  auto head = shardMapFromJson(withoutSegments(split->object));
  ASSERT_TRUE(head.ok()) << head.status().toString();
  EXPECT_TRUE(head->status.pods.empty());
  EXPECT_TRUE(isSegmentedHead(head->status));
  EXPECT_FALSE(shardTableFromStatus(head->status, head->spec.shards).ok());
  EXPECT_EQ(head->status.epoch, object["status"]["epoch"].get<std::int64_t>());
  auto whole2 = shardMapFromJson(*whole);
  ASSERT_TRUE(whole2.ok());
  EXPECT_FALSE(isSegmentedHead(whole2->status));
}

TEST(ShardMapSegments, ALongUnassignedSetIsCutAtCommasAndJoinedBack) {
  ShardMap m;
  m.metadata.name = "counter";
  m.metadata.namespace_ = "demo";
  m.metadata.uid = "u";
  m.metadata.resourceVersion = "7";
  m.spec.shards = 100000;
  // Every third shard unassigned: a long list of single ids.
  for (ShardId s = 1; s <= 100000; s += 3) m.status.unassigned.append(s);
  const json object = toJson(m);
  auto split = splitStatus(object, kSmall);
  ASSERT_TRUE(split.ok()) << split.status().toString();
  ASSERT_GT(split->segments.size(), 5u);
  for (const Segment& s : split->segments) EXPECT_LE(s.data.size(), kSmall.segmentBytes);
  auto whole = assembleStatus(split->object, dataOf(*split));
  ASSERT_TRUE(whole.ok()) << whole.status().toString();
  EXPECT_EQ(*whole, object);
}

TEST(ShardMapSegments, ATamperedSegmentIsRefused) {
  auto split = splitStatus(largeMap(), kSmall);
  ASSERT_TRUE(split.ok());
  std::vector<std::string> data = dataOf(*split);
  // Same length, one pod's address changed: the digest tells.
  const std::size_t at = data[0].find("10.244.");
  ASSERT_NE(at, std::string::npos);
  data[0][at + 3] = '5';
  auto whole = assembleStatus(split->object, data);
  EXPECT_EQ(whole.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(whole.status().message().find(split->segments[0].ref.name), std::string::npos);
  // Too few segments, or data that is not a segment's.
  data = dataOf(*split);
  data.pop_back();
  EXPECT_EQ(assembleStatus(split->object, data).status().code(), StatusCode::kInvalidArgument);
  json stub = split->object;
  stub["status"]["segments"] = json::array({{{"name", "x"}, {"sha256", sha256Hex("[1]")}}});
  EXPECT_EQ(assembleStatus(stub, {"[1]"}).status().code(), StatusCode::kInvalidArgument);
  stub["status"]["segments"] = "x";
  EXPECT_EQ(segmentRefs(stub).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardMapSegments, UnchangedSegmentsKeepTheirNamesAndNewOnesNeverRepeatAnOldName) {
  json before = largeMap();
  auto first = splitStatus(before, kSmall);
  ASSERT_TRUE(first.ok());
  std::vector<SegmentRef> named;
  for (const Segment& s : first->segments) named.push_back(s.ref);
  // The next version (another resourceVersion) changes only the last pod.
  json next = before;
  next["metadata"]["resourceVersion"] = "1001";
  next["status"]["pods"].back()["version"] = "1.4.3";
  auto second = splitStatus(next, kSmall, named);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->segments.size(), first->segments.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < second->segments.size(); ++i) {
    if (second->segments[i].ref == first->segments[i].ref) {
      ++kept;
    } else {
      // Changed data gets a name no version named before.
      for (const SegmentRef& old : named) EXPECT_NE(second->segments[i].ref.name, old.name);
    }
  }
  EXPECT_EQ(kept, first->segments.size() - 1);
  // The same data written against another version, with nothing to reuse: all new names.
  auto third = splitStatus(next, kSmall);
  ASSERT_TRUE(third.ok());
  for (const Segment& s : third->segments) {
    for (const SegmentRef& old : named) EXPECT_NE(s.ref.name, old.name);
  }
}

TEST(ShardMapSegments, AnElementLargerThanASegmentIsAnError) {
  json object = largeMap();
  object["status"]["pods"][0]["incarnation"] = std::string(9000, 'x');
  auto split = splitStatus(object, kSmall);
  EXPECT_EQ(split.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(split.status().message().find("status.pods"), std::string::npos);
}

TEST(ShardMapSegments, TheLargestMapFitsObjectsUnderOneMebibyte) {
  SeededRandom r(11);
  const json object = toJson(testing::balancedMap(100000, 10000, r));
  auto split = splitStatus(object);
  ASSERT_TRUE(split.ok()) << split.status().toString();
  ASSERT_FALSE(split->segments.empty());
  EXPECT_LT(split->object.dump().size(), 64u * 1024);
  for (const Segment& s : split->segments) {
    EXPECT_LT(segmentObject(split->object, s).dump().size(), 1024u * 1024);
  }
  auto whole = assembleStatus(split->object, dataOf(*split));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, object);
}

TEST(ShardMapSegments, ASegmentObjectIsOwnedByItsMapAndLabelled) {
  auto split = splitStatus(largeMap(), kSmall);
  ASSERT_TRUE(split.ok());
  const json object = segmentObject(split->object, split->segments[0]);
  EXPECT_EQ(object["kind"], kSegmentKind);
  EXPECT_EQ(object["metadata"]["name"], split->segments[0].ref.name);
  EXPECT_EQ(object["metadata"]["namespace"], "demo");
  EXPECT_EQ(object["metadata"]["labels"]["kshard.io/shard-map"], "counter");
  EXPECT_EQ(object["metadata"]["ownerReferences"][0]["uid"], split->object["metadata"]["uid"]);
  auto data = segmentData(object);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, split->segments[0].data);
  EXPECT_EQ(segmentData(json::object()).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardMapSegments, CompleteFetchesEverySegmentOrAnswersTheFirstError) {
  const json object = largeMap();
  auto split = splitStatus(object, kSmall);
  ASSERT_TRUE(split.ok());
  std::map<std::string, std::string> stored;
  for (const Segment& s : split->segments) stored[s.ref.name] = s.data;
  const std::string missing = split->segments[2].ref.name;
  int asked = 0;
  const auto fetch = [&](const std::string& name,
                         std::function<void(StatusOr<std::string>)> got) {
    ++asked;
    auto it = stored.find(name);
    if (it == stored.end()) return got(notFound(name));
    got(it->second);
  };
  std::optional<StatusOr<json>> answer;
  completeShardMap(split->object, fetch, [&](StatusOr<json> r) { answer = std::move(r); });
  ASSERT_TRUE(answer && answer->ok());
  EXPECT_EQ(**answer, object);
  EXPECT_EQ(asked, static_cast<int>(split->segments.size()));

  stored.erase(missing);
  answer.reset();
  completeShardMap(split->object, fetch, [&](StatusOr<json> r) { answer = std::move(r); });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), StatusCode::kNotFound);

  // Inline: answered at once, nothing fetched.
  asked = 0;
  answer.reset();
  ShardMap tiny;
  tiny.metadata.name = "a";
  tiny.spec.shards = 3;
  const json small = toJson(tiny);
  completeShardMap(small, fetch, [&](StatusOr<json> r) { answer = std::move(r); });
  ASSERT_TRUE(answer && answer->ok());
  EXPECT_EQ(**answer, small);
  EXPECT_EQ(asked, 0);
}

}  // namespace
}  // namespace kshard::sharding
