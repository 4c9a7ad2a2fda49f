// A replica that holds only the head of a segmented map (what the informer gives a follower:
// decision 0018) has no pods to confirm or serve. Until it holds the whole map it answers
// renew, assignments and changes as a replica that does not lead yet, so that no sidecar takes
// an empty map or re-registers for nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "sharding/shard_map_json.h"
#include "sharding/shard_map_segments.h"
#include "tests/operator/controller_harness.h"

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;
using testing::ControllerHarness;

TEST(SegmentedHead, AReplicaHoldingOnlyTheHeadServesNothingOfTheMap) {
  ControllerHarness h;
  h.lead(0);
  for (const char* name : {"p0", "p1"}) {
    h.startPod(name);
    ASSERT_EQ(h.registerPod(name), 200);
  }
  h.run(30s);
  const sharding::ShardMap full = h.stored();
  ASSERT_EQ(full.status.pods.size(), 2u);
  const auto served = [&](std::size_t replica) {
    protocol::Target target{full.status.pods[0].name, full.status.pods[0].uid, ""};
    std::vector<int> codes;
    codes.push_back(
        h.call([&](Reply r) { h.controller(replica).renew(target, std::move(r)); }).status);
    codes.push_back(
        h.call([&](Reply r) { h.controller(replica).assignments(std::move(r)); }).status);
    codes.push_back(
        h.call([&](Reply r) { h.controller(replica).changes("1", "", std::move(r)); }).status);
    return codes;
  };
  EXPECT_EQ(served(0)[1], 200);

  // The head, as a replica decodes a segmented object without its segments.
  auto split = sharding::splitStatus(sharding::toJson(full),
                                     {.inlineBytes = 1024, .segmentBytes = 400 * 1024});
  ASSERT_TRUE(split.ok());
  ASSERT_FALSE(split->segments.empty());
  auto head = sharding::shardMapFromJson(sharding::withoutSegments(split->object));
  ASSERT_TRUE(head.ok()) << head.status().toString();
  h.store.put(*head);
  h.addReplica("kshard-operator-1");
  h.loseLease(0);
  // Replica 1 leads; its takeover reads only the head and cannot act on it (its one assignment
  // names no registered pod), so it holds the head, as a new leader does before its read.
  for (std::size_t i = 0; i < 2; ++i) {
    h.replica(i).leadership.holderName = "kshard-operator-1";
    h.replica(i).leadership.deposedFlag = i == 0;
  }
  h.replica(1).leadership.leader = true;
  h.replica(1).leadership.renewedAt = h.scheduler.clock().now();
  h.controller(1).startLeading();
  h.run(5s);
  for (int code : served(1)) EXPECT_EQ(code, 503);
  EXPECT_EQ(h.stored().status, head->status) << "the head was written back";
}

}  // namespace
}  // namespace kshard::manager
