#include "kube/event_recorder.h"

#include <gtest/gtest.h>

#include "kube/api_time.h"
#include "tests/kube/fake_api_server.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeApiServer;

const json kShardMap = {
    {"apiVersion", "kshard.io/v1alpha1"},
    {"kind", "ShardMap"},
    {"metadata",
     {{"name", "counter"}, {"namespace", "demo"}, {"uid", "sm-uid"}, {"resourceVersion", "77"}}}};

class EventRecorderTest : public ::testing::Test {
 protected:
  EventRecorderTest() {
    ClientOptions o;
    o.qps = 0;
    o.maxRetries = 0;
    client_ = std::make_unique<Client>(server_, scheduler_, random_, logger_, o);
  }
  std::unique_ptr<EventRecorder> recorder(EventRecorderOptions o = {}) {
    o.reportingController = "kshard.io/operator";
    o.reportingInstance = "kshard-operator-0";
    return std::make_unique<EventRecorder>(*client_, scheduler_, logger_, o);
  }
  std::vector<json> events() { return server_.list(resources::kEvents, "demo"); }

  ManualScheduler scheduler_;
  FakeApiServer server_{scheduler_.clock()};
  SeededRandom random_{1};
  Logger logger_{"kube-test", LogLevel::kError, [](std::string_view) {}};
  std::unique_ptr<Client> client_;
};

TEST_F(EventRecorderTest, WritesAnEventWithEveryRequiredField) {
  auto r = recorder();
  EXPECT_TRUE(r->record(ObjectReference::of(kShardMap), EventType::kNormal, "Rebalanced",
                        "Rebalance", "moved 12 shards in 84 ms"));
  EXPECT_TRUE(events().empty()) << "record() must not write on the caller's thread";
  scheduler_.runDue();
  auto all = events();
  ASSERT_EQ(all.size(), 1u);
  const json& e = all[0];
  EXPECT_EQ(e["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(e["eventTime"], formatMicroTime(scheduler_.clock().wallNow()));
  EXPECT_EQ(e["reportingController"], "kshard.io/operator");
  EXPECT_EQ(e["reportingInstance"], "kshard-operator-0");
  EXPECT_EQ(e["action"], "Rebalance");
  EXPECT_EQ(e["reason"], "Rebalanced");
  EXPECT_EQ(e["note"], "moved 12 shards in 84 ms");
  EXPECT_EQ(e["type"], "Normal");
  EXPECT_EQ(e["regarding"], (json{{"apiVersion", "kshard.io/v1alpha1"},
                                  {"kind", "ShardMap"},
                                  {"namespace", "demo"},
                                  {"name", "counter"},
                                  {"uid", "sm-uid"},
                                  {"resourceVersion", "77"}}));
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("counter.", 0), 0u);
  EXPECT_FALSE(e.contains("series"));
  EXPECT_EQ(r->stats().created, 1u);
}

TEST_F(EventRecorderTest, RepeatsWithinTheWindowBecomeASeries) {
  auto r = recorder();
  const auto ref = ObjectReference::of(kShardMap);
  r->record(ref, EventType::kWarning, "PodUnreachable", "Ping", "counter-1 did not answer");
  scheduler_.runDue();
  scheduler_.advance(seconds(5));
  r->record(ref, EventType::kWarning, "PodUnreachable", "Ping", "counter-1 did not answer");
  scheduler_.runDue();
  auto all = events();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["series"]["count"], 2);
  EXPECT_EQ(all[0]["series"]["lastObservedTime"], formatMicroTime(scheduler_.clock().wallNow()));

  // Further repeats are counted locally and written with the next flush.
  for (int i = 0; i < 5; ++i) {
    scheduler_.advance(seconds(1));
    r->record(ref, EventType::kWarning, "PodUnreachable", "Ping", "counter-1 did not answer");
  }
  scheduler_.runDue();
  EXPECT_EQ(events()[0]["series"]["count"], 2);
  const std::string lastSeen = formatMicroTime(scheduler_.clock().wallNow());
  scheduler_.advance(seconds(30));
  all = events();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["series"]["count"], 7);
  EXPECT_EQ(all[0]["series"]["lastObservedTime"], lastSeen);
  EXPECT_EQ(r->stats().created, 1u);
  EXPECT_EQ(r->stats().patched, 2u);
}

TEST_F(EventRecorderTest, ADifferentNoteOrReasonIsAnotherEvent) {
  auto r = recorder();
  const auto ref = ObjectReference::of(kShardMap);
  r->record(ref, EventType::kNormal, "Rebalanced", "Rebalance", "moved 3 shards");
  r->record(ref, EventType::kNormal, "Rebalanced", "Rebalance", "moved 4 shards");
  r->record(ref, EventType::kNormal, "Registered", "Register", "moved 3 shards");
  scheduler_.runDue();
  auto all = events();
  ASSERT_EQ(all.size(), 3u);
  for (const auto& e : all) EXPECT_FALSE(e.contains("series"));
}

TEST_F(EventRecorderTest, AfterTheWindowARepeatStartsANewEvent) {
  auto r = recorder();
  const auto ref = ObjectReference::of(kShardMap);
  r->record(ref, EventType::kNormal, "Rebalanced", "Rebalance", "moved 3 shards");
  scheduler_.runDue();
  scheduler_.advance(minutes(7));
  r->record(ref, EventType::kNormal, "Rebalanced", "Rebalance", "moved 3 shards");
  scheduler_.runDue();
  auto all = events();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(all[0].contains("series"));
  EXPECT_FALSE(all[1].contains("series"));
}

TEST_F(EventRecorderTest, NoteIsCutToOneKibibyteOnACharacterBoundary) {
  auto r = recorder();
  std::string note(1023, 'x');
  note += "\xC3\xA9";  // 'é' straddles the limit
  note += std::string(100, 'y');
  r->record(ObjectReference::of(kShardMap), EventType::kNormal, "Long", "Test", note);
  scheduler_.runDue();
  auto all = events();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["note"], std::string(1023, 'x'));
}

TEST_F(EventRecorderTest, FullQueueDropsInsteadOfBlocking) {
  EventRecorderOptions o;
  o.queueCapacity = 2;
  auto r = recorder(o);
  const auto ref = ObjectReference::of(kShardMap);
  EXPECT_TRUE(r->record(ref, EventType::kNormal, "A", "Test", "1"));
  EXPECT_TRUE(r->record(ref, EventType::kNormal, "B", "Test", "2"));
  EXPECT_FALSE(r->record(ref, EventType::kNormal, "C", "Test", "3"));
  EXPECT_EQ(r->stats().dropped, 1u);
  scheduler_.runDue();
  EXPECT_EQ(events().size(), 2u);
  EXPECT_EQ(r->pending(), 0u);
}

TEST_F(EventRecorderTest, TransientFailuresAreRetried) {
  int failures = 2;
  server_.intercept([&](const http::Request& req) -> std::optional<StatusOr<http::Response>> {
    if (req.method == http::Method::kPost && failures > 0) {
      --failures;
      return StatusOr<http::Response>(unavailable("connection refused"));
    }
    return std::nullopt;
  });
  auto r = recorder();
  r->record(ObjectReference::of(kShardMap), EventType::kNormal, "Rebalanced", "Rebalance", "x");
  scheduler_.runDue();
  EXPECT_TRUE(events().empty());
  scheduler_.advance(seconds(4));
  EXPECT_EQ(events().size(), 1u);
  EXPECT_EQ(r->stats().created, 1u);
}

TEST_F(EventRecorderTest, InvalidEventsAreDropped) {
  auto r = recorder();
  EXPECT_FALSE(r->record(ObjectReference{}, EventType::kNormal, "Reason", "Action", "no name"));
  EXPECT_FALSE(r->record(ObjectReference::of(kShardMap), EventType::kNormal, "", "Action", ""));
  EXPECT_FALSE(r->record(ObjectReference::of(kShardMap), EventType::kNormal, "R",
                         std::string(129, 'a'), ""));
  scheduler_.runDue();
  EXPECT_TRUE(events().empty());
  EXPECT_EQ(r->stats().dropped, 3u);
}

TEST_F(EventRecorderTest, ClusterScopedObjectsGetEventsInTheDefaultNamespace) {
  auto r = recorder();
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  r->record(ObjectReference::of(node), EventType::kWarning, "Pressure", "Check", "disk");
  scheduler_.runDue();
  EXPECT_EQ(server_.list(resources::kEvents, "default").size(), 1u);
}

}  // namespace
}  // namespace kshard::kube
