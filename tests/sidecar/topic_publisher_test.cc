// TopicPublisher on a simulated clock: a publication goes once to every pod of the map (this one
// without the network), is retried only while it surely was not sent, and the answer counts
// what each pod made of it.
#include "sidecar/topic_publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metrics/prometheus_registry.h"
#include "protocol/wire.h"
#include "tests/sidecar/held_host.h"
#include "tests/sidecar/held_topics.h"
#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::HeldHost;
using testing::HeldPublishes;
using testing::HeldTopicHost;
using ::testing::IsEmpty;
using testing::makeMap;
namespace errors = protocol::errors;

class RecordingReporter : public UnhealthyReporter {
 public:
  void reportUnreachable(const std::string& pod) override { pods.push_back(pod); }
  std::vector<std::string> pods;
};

// The failed pods of a summary, as "pod code".
std::vector<std::string> failures(const PublishSummary& s) {
  std::vector<std::string> out;
  for (const auto& f : s.failed) out.push_back(f.pod + " " + f.code);
  return out;
}

class TopicPublisherTest : public ::testing::Test {
 protected:
  TopicPublisherTest() : peers_(scheduler_.clock()), metrics_(registry_) {
    // This pod is p1; p2 and p3 are its peers.
    EXPECT_TRUE(table_.update(makeMap(12, 5, {{"p1", "1-4"}, {"p2", "5-8"}, {"p3", "9-12"}})));
  }

  void publish(std::optional<std::string> entities = std::nullopt, Duration timeout = seconds(10)) {
    Publication p;
    p.topic = "news";
    p.entityType = std::move(entities);
    p.publisher = "p1";
    p.headers.set("Content-Type", "text/plain");
    p.body = "hello";
    publisher_.publish(std::move(p), timeout,
                       [this](PublishSummary&& s) { answers_.push_back(std::move(s)); });
  }
  // Advances the clock in 1 ms steps until `done` or `limit` passed.
  void advanceUntil(const std::function<bool()>& done, Duration limit) {
    for (Duration d{0}; d < limit && !done(); d += milliseconds(1)) {
      scheduler_.advance(milliseconds(1));
    }
  }
  std::string metric(const std::string& series) {
    const std::string text = registry_.exposition();
    const auto at = text.find("\n" + series + " ");
    if (at == std::string::npos) return "absent";
    const auto start = at + series.size() + 2;
    return text.substr(start, text.find('\n', start) - start);
  }

  ManualScheduler scheduler_;
  HeldHost host_;
  EntityRegistry entities_{host_, scheduler_, {}, Logger("test", LogLevel::kError)};
  HeldTopicHost app_;
  TopicDelivery local_{entities_, app_};
  RoutingTable table_;
  HeldPublishes peers_;
  RecordingReporter reporter_;
  SeededRandom random_{1};
  metrics::PrometheusRegistry registry_;
  SidecarMetrics metrics_;
  TopicPublisher publisher_{table_,    local_,     peers_,
                            reporter_, scheduler_, random_,
                            {"p1"},    metrics_,   Logger("test", LogLevel::kError)};
  std::vector<PublishSummary> answers_;
};

TEST_F(TopicPublisherTest, SendsOnceToEveryPodAndToItsOwnAppWithoutTheNetwork) {
  publish();
  ASSERT_EQ(peers_.calls.size(), 2u);
  EXPECT_EQ(peers_.callsTo("p2"), 1u);
  EXPECT_EQ(peers_.callsTo("p3"), 1u);
  EXPECT_EQ(peers_.callsTo("p1"), 0u) << "this pod was sent its own publication over the network";
  EXPECT_EQ(peers_.calls[0].pod.address, "10.0.0.2:7101");
  EXPECT_EQ(peers_.calls[0].timeout, seconds(10));
  ASSERT_EQ(app_.calls.size(), 1u);
  EXPECT_EQ(app_.calls[0].publication->topic, "news");
  EXPECT_EQ(app_.calls[0].publication->body, "hello");
  EXPECT_EQ(app_.calls[0].publication->publisher, "p1");
  // One publication shared by every send, not a copy per pod.
  EXPECT_EQ(peers_.calls[0].publication.get(), app_.calls[0].publication.get());

  peers_.accept("p3");
  app_.complete(204);
  EXPECT_TRUE(answers_.empty()) << "answered before every pod had";
  peers_.accept("p2");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].pods, 3u);
  EXPECT_EQ(answers_[0].accepted, 3u);
  EXPECT_THAT(answers_[0].failed, IsEmpty());
  EXPECT_EQ(metric("kshard_sidecar_topic_publishes_total"), "1");
  EXPECT_EQ(metric(R"(kshard_sidecar_topic_deliveries_total{result="accepted"})"), "3");
  // Nothing is sent again afterwards, and the deadline's timer is gone.
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(peers_.calls.empty());
  EXPECT_EQ(answers_.size(), 1u);
}

TEST_F(TopicPublisherTest, AnEmptyMapIsAnsweredAtOnce) {
  ASSERT_TRUE(table_.update(makeMap(12, 6, {})));
  publish();
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].pods, 0u);
  EXPECT_EQ(answers_[0].accepted, 0u);
  EXPECT_TRUE(peers_.calls.empty());
  EXPECT_TRUE(app_.calls.empty());
  EXPECT_EQ(scheduler_.pending(), 0u);
}

TEST_F(TopicPublisherTest, APodNotInTheMapIsNotSentToNotEvenThisOne) {
  // This pod has left the map (it drained and unregistered): only the others get it.
  ASSERT_TRUE(table_.update(makeMap(12, 6, {{"p2", "1-6"}, {"p3", "7-12"}})));
  publish();
  EXPECT_TRUE(app_.calls.empty());
  peers_.accept("p2");
  peers_.accept("p3");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].pods, 2u);
  EXPECT_EQ(answers_[0].accepted, 2u);
}

TEST_F(TopicPublisherTest, EachPodsRefusalIsListedWithItsCode) {
  publish();
  peers_.complete("p2", ForwardOutcome::kAnswered, 503,
                  R"({"error":{"code":"Draining","message":"this pod drains"}})",
                  std::string(errors::kDraining));
  // A peer of an older release does not know the route: the router's 404, its code in the body.
  peers_.complete("p3", ForwardOutcome::kAnswered, 404,
                  R"({"error":{"code":"NotFound","message":"no route"}})");
  app_.complete(500);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].pods, 3u);
  EXPECT_EQ(answers_[0].accepted, 0u);
  EXPECT_EQ(failures(answers_[0]),
            (std::vector<std::string>{"p1 AppRefused", "p2 Draining", "p3 NotFound"}));
  EXPECT_EQ(metric(R"(kshard_sidecar_topic_deliveries_total{result="refused"})"), "3");
  // A refusal is an answer: nothing is sent again.
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(peers_.calls.empty());
}

TEST_F(TopicPublisherTest, NeverSendsAgainOnceARequestMayHaveGoneOut) {
  publish();
  app_.complete();
  peers_.complete("p2", ForwardOutcome::kFailed);    // the exchange broke after sending
  peers_.complete("p3", ForwardOutcome::kTimedOut);  // no answer in time
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].accepted, 1u);
  EXPECT_EQ(failures(answers_[0]),
            (std::vector<std::string>{"p2 OutcomeUnknown", "p3 OutcomeUnknown"}));
  EXPECT_EQ(metric(R"(kshard_sidecar_topic_deliveries_total{result="unknown"})"), "2");
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(peers_.calls.empty()) << "a publication that may have arrived was sent again";
}

TEST_F(TopicPublisherTest, RetriesWhatSurelyWasNotSentUntilTheDeadline) {
  const SteadyTime start = scheduler_.clock().now();
  publish(std::nullopt, seconds(2));
  app_.complete();
  peers_.accept("p3");
  int attempts = 0;
  while (answers_.empty() && attempts < 1000) {
    ASSERT_EQ(peers_.callsTo("p2"), 1u) << "after " << attempts << " attempts";
    EXPECT_LE(peers_.calls[0].timeout, seconds(2));
    peers_.complete("p2", ForwardOutcome::kUnreachable);
    ++attempts;
    advanceUntil([&] { return !peers_.calls.empty() || !answers_.empty(); }, seconds(1));
  }
  EXPECT_GT(attempts, 3) << "an unreachable pod was not retried";
  EXPECT_EQ(reporter_.pods.front(), "p2");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_LE(scheduler_.clock().now() - start, seconds(2)) << "answered after the send timeout";
  EXPECT_EQ(answers_[0].accepted, 2u);
  EXPECT_EQ(failures(answers_[0]), std::vector<std::string>{"p2 SendTimeout"});
  EXPECT_EQ(metric(R"(kshard_sidecar_topic_deliveries_total{result="not_sent"})"), "1");
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(peers_.calls.empty());
}

TEST_F(TopicPublisherTest, ARefusedCallerIsRetriedAndThenAccepted) {
  publish();
  app_.complete();
  peers_.accept("p3");
  // p2 has not seen this pod register yet (503 AuthenticationUnavailable): nothing delivered.
  peers_.complete("p2", ForwardOutcome::kCallerRefused, 503);
  EXPECT_TRUE(answers_.empty());
  EXPECT_TRUE(reporter_.pods.empty()) << "a pod that answered was reported unreachable";
  advanceUntil([&] { return !peers_.calls.empty(); }, seconds(1));
  ASSERT_EQ(peers_.callsTo("p2"), 1u);
  EXPECT_LT(peers_.calls[0].timeout, seconds(10)) << "a retry was given the whole send timeout";
  peers_.accept("p2");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].accepted, 3u);
}

TEST_F(TopicPublisherTest, APodThatLeftBeforeARetryIsNotSentToAgain) {
  publish();
  app_.complete();
  peers_.accept("p3");
  peers_.complete("p2", ForwardOutcome::kUnreachable);
  // p2 leaves the map before the retry.
  ASSERT_TRUE(table_.update(makeMap(12, 6, {{"p1", "1-6"}, {"p3", "7-12"}})));
  advanceUntil([&] { return !answers_.empty() || !peers_.calls.empty(); }, seconds(1));
  EXPECT_TRUE(peers_.calls.empty()) << "a pod that left was sent the publication";
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].pods, 3u);
  EXPECT_EQ(answers_[0].accepted, 2u);
  EXPECT_EQ(failures(answers_[0]), std::vector<std::string>{"p2 PodLeft"});
}

TEST_F(TopicPublisherTest, ARetryGoesWhereThePodIsNowAndNoPodThatJoinedGetsIt) {
  publish();
  app_.complete();
  peers_.accept("p3");
  peers_.complete("p2", ForwardOutcome::kUnreachable);
  // p2's sidecar restarted at another address, and p4 joined.
  auto map = makeMap(12, 6, {{"p1", "1-4"}, {"p2", "5-8"}, {"p3", "9-12"}, {"p4", ""}});
  map.status.pods[1].address = "10.0.0.9:7101";
  ASSERT_TRUE(table_.update(map));
  advanceUntil([&] { return !peers_.calls.empty(); }, seconds(1));
  ASSERT_EQ(peers_.calls.size(), 1u);
  EXPECT_EQ(peers_.calls[0].pod.pod, "p2");
  EXPECT_EQ(peers_.calls[0].pod.address, "10.0.0.9:7101");
  peers_.accept("p2");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].pods, 3u) << "a pod that joined during the publish was counted";
  EXPECT_EQ(answers_[0].accepted, 3u);
}

TEST_F(TopicPublisherTest, APodSlowerThanTheSendTimeoutIsOutcomeUnknownAndItsLateAnswerIgnored) {
  publish(std::nullopt, seconds(3));
  peers_.accept("p3");
  // p2 holds the request, and this pod's own app does not answer either.
  scheduler_.advance(seconds(3) - milliseconds(1));
  EXPECT_TRUE(answers_.empty());
  scheduler_.advance(milliseconds(1));
  ASSERT_EQ(answers_.size(), 1u) << "not answered at the send timeout";
  EXPECT_EQ(answers_[0].accepted, 1u);
  EXPECT_EQ(failures(answers_[0]),
            (std::vector<std::string>{"p1 OutcomeUnknown", "p2 OutcomeUnknown"}));
  // The late answers change nothing and are not sent again.
  peers_.accept("p2");
  app_.complete();
  EXPECT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].accepted, 1u);
  scheduler_.advance(seconds(30));
  EXPECT_TRUE(peers_.calls.empty());
}

TEST_F(TopicPublisherTest, EntitiesModeTellsEveryActiveEntityOfTheTypeHereAndSumsThePods) {
  ASSERT_THAT(entities_.assign({1, 2, 3, 4}, 5), IsEmpty());
  for (const auto& [type, id] : std::vector<std::pair<std::string, std::string>>{
           {"counter", "a"}, {"counter", "b"}, {"cart", "c"}}) {
    Message m;
    m.key = {type, id};
    m.shard = 1;
    m.mode = DeliveryMode::kTell;
    entities_.deliver(std::move(m), [](DeliveryOutcome&&) {});
    host_.completeDelivery();
  }
  publish("counter");
  EXPECT_TRUE(app_.calls.empty()) << "the app's topic callback was called in entities mode";
  ASSERT_EQ(host_.deliveries.size(), 2u) << "not one tell per active counter";
  for (const auto& d : host_.deliveries) {
    EXPECT_EQ(d.message.key.type, "counter");
    EXPECT_EQ(d.message.mode, DeliveryMode::kTell);
    EXPECT_EQ(d.message.body, "hello");
  }
  EXPECT_EQ(peers_.calls[0].publication->entityType, "counter");
  peers_.accept("p2", 3);
  peers_.accept("p3", 0);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].accepted, 3u);
  EXPECT_EQ(answers_[0].entities, 5u);
}

TEST_F(TopicPublisherTest, ADrainingPodRefusesAndStillPublishesToTheOthers) {
  entities_.drain(seconds(5), [](bool) {});
  publish();
  EXPECT_TRUE(app_.calls.empty()) << "a draining pod's app got the publication";
  peers_.accept("p2");
  peers_.accept("p3");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].accepted, 2u);
  EXPECT_EQ(failures(answers_[0]), std::vector<std::string>{"p1 Draining"});
}

TEST_F(TopicPublisherTest, APodWhoseLeaseRanOutRefuses) {
  entities_.setLeaseDuration(seconds(30));  // and never confirmed
  publish("counter");
  peers_.accept("p2");
  peers_.accept("p3");
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(failures(answers_[0]), std::vector<std::string>{"p1 LeaseFenced"});
  EXPECT_TRUE(host_.deliveries.empty());
}

TEST_F(TopicPublisherTest, TheAppsFailureTellsWhetherItMayHaveTakenThePublication) {
  ASSERT_TRUE(table_.update(makeMap(12, 6, {{"p1", "1-12"}})));
  publish();
  app_.complete(0, unavailable("connection refused"));
  publish();
  app_.complete(0, Status(StatusCode::kDeadlineExceeded, "no answer"));
  ASSERT_EQ(answers_.size(), 2u);
  EXPECT_EQ(failures(answers_[0]), std::vector<std::string>{"p1 AppUnavailable"});
  EXPECT_EQ(failures(answers_[1]), std::vector<std::string>{"p1 OutcomeUnknown"});
}

}  // namespace
}  // namespace kshard::sidecar
