// Component test of topics (tests/sidecar/component_fixture.h): a publication through any of the
// three real sidecars reaches every pod's app exactly once, under traffic; with ?entities= it is
// told to every active entity of the type; a pod that does not answer in time or cannot be
// reached is named in the answer, which comes by the send timeout, and is never sent it twice.
#include "tests/sidecar/component_fixture.h"

namespace kshard::sidecar {
namespace {

constexpr auto kSendTimeout = seconds(3);

class SidecarTopicsTest : public SidecarComponentTest {
 protected:
  void configureMap(sharding::ShardMapSpec& spec) override {
    spec.sendTimeout = kSendTimeout;
    // The counters stay active for the publications told to them.
    spec.entityIdleTimeout = seconds(120);
  }
  void SetUp() override {
    SidecarComponentTest::SetUp();
    // A publication goes to the pods a sidecar's copy of the map lists: each sidecar has taken
    // its shards from the stub operator's commands, and sees the others once it read the map.
    for (const auto& sc : sidecars_) {
      ASSERT_TRUE(waitFor([&] { return podsSeenBy(*sc) == 3; }, seconds(10)))
          << sc->pod << " does not list the three pods";
    }
  }
  std::size_t podsSeenBy(Sidecar& sc) {
    http::Request r;
    r.target = "/v1/shard-map";
    auto res = sc.api->sendSync(std::move(r));
    if (!res.ok() || res->status != 200) return 0;
    return json::parse(res->body)["pods"].size();
  }

  // Publishes `body` to `target` ("news", "news?entities=counter") through `via`'s app API and
  // returns the answer's JSON (null when the call failed or did not answer 200).
  json publish(Sidecar& via, const std::string& target, const std::string& body) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/v1/topics/" + target;
    r.headers.set("Content-Type", "text/plain");
    r.body = body;
    auto res = via.api->sendSync(std::move(r));
    EXPECT_TRUE(res.ok()) << "publish via " << via.pod << ": " << res.status().toString();
    if (!res.ok()) return nullptr;
    EXPECT_EQ(res->status, 200) << res->body;
    if (res->status != 200) return nullptr;
    return json::parse(res->body);
  }
  // The failed pods of an answer, as "pod code".
  static std::vector<std::string> failures(const json& answer) {
    std::vector<std::string> out;
    for (const auto& f : answer["failed"]) {
      out.push_back(f["pod"].get<std::string>() + " " + f["code"].get<std::string>());
    }
    return out;
  }
};

// Whichever way the sidecars talk to each other.
class SidecarTopicsTransportTest : public SidecarTopicsTest,
                                   public ::testing::WithParamInterface<std::string> {
 protected:
  std::string peerTransport() const override { return GetParam(); }
};

TEST_P(SidecarTopicsTransportTest, EveryPodsAppGetsEachPublicationExactlyOnceUnderTraffic) {
  Traffic traffic;
  std::atomic<int> senders{3};
  startTraffic(traffic, senders, 2);
  constexpr int kPublications = 9;
  for (int i = 0; i < kPublications; ++i) {
    Sidecar& via = *sidecars_[static_cast<std::size_t>(i) % sidecars_.size()];
    const json answer = publish(via, "news%2Fsport", "m" + std::to_string(i));
    ASSERT_FALSE(answer.is_null());
    EXPECT_EQ(answer["topic"], "news/sport");
    EXPECT_EQ(answer["pods"], 3) << answer.dump();
    EXPECT_EQ(answer["accepted"], 3) << answer.dump();
    EXPECT_EQ(answer["failed"], json::array()) << answer.dump();
  }
  stopTraffic(traffic);
  EXPECT_TRUE(traffic.failures.empty()) << traffic.failures.front();
  // Accepted means the app answered: every count is in already.
  for (std::size_t p = 0; p < apps_.size(); ++p) {
    for (int i = 0; i < kPublications; ++i) {
      EXPECT_EQ(apps_[p]->published("news/sport", "m" + std::to_string(i)), 1)
          << "p" << p + 1 << "'s app, publication " << i;
    }
  }
  for (const auto& sc : sidecars_) {
    EXPECT_EQ(metric(*sc, "kshard_sidecar_topic_publishes_total"), 3.0) << sc->pod;
    EXPECT_EQ(metric(*sc, R"(kshard_sidecar_topic_deliveries_total{result="accepted"})"), 9.0)
        << sc->pod;
  }
}

INSTANTIATE_TEST_SUITE_P(PeerTransports, SidecarTopicsTransportTest,
                         ::testing::Values("channel", "http"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_F(SidecarTopicsTest, EntitiesModeTellsEveryActiveEntityOfTheTypeOnEveryPod) {
  constexpr int kCounters = 30;
  for (int i = 0; i < kCounters; ++i) {
    auto r = increment(*sidecars_[static_cast<std::size_t>(i) % 3], "t" + std::to_string(i));
    ASSERT_TRUE(r.ok() && r->status == 200);
  }
  const json answer = publish(*sidecars_[1], "tick?entities=counter", R"({"op":"increment"})");
  ASSERT_FALSE(answer.is_null());
  EXPECT_EQ(answer["accepted"], 3) << answer.dump();
  EXPECT_EQ(answer["entities"], kCounters) << answer.dump();
  EXPECT_EQ(answer["entitiesRefused"], 0) << answer.dump();
  // Each counter gets the tell once, as its second message; no topic callback is called.
  for (int i = 0; i < kCounters; ++i) {
    const std::string id = "t" + std::to_string(i);
    const auto received = [&] {
      int n = 0;
      for (const auto& app : apps_) n += app->received(id);
      return n;
    };
    EXPECT_TRUE(waitFor([&] { return received() == 2; }, seconds(10)))
        << id << " received " << received() << " messages, want 2";
  }
  for (const auto& app : apps_) EXPECT_EQ(app->published("tick", R"({"op":"increment"})"), 0);
  const json none = publish(*sidecars_[0], "tick?entities=cart", "x");
  ASSERT_FALSE(none.is_null());
  EXPECT_EQ(none["accepted"], 3);
  EXPECT_EQ(none["entities"], 0);
}

TEST_F(SidecarTopicsTest, APeerThatDoesNotAnswerInTimeIsOutcomeUnknownAndNeverGetsItTwice) {
  // The channels to the peers are open, so the next publication goes out on them.
  ASSERT_EQ(publish(*sidecars_[0], "warm", "w")["accepted"], 3);
  Sidecar& slow = *sidecars_[2];
  slow.process->signal(SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  const json answer = publish(*sidecars_[0], "news", "late");
  const auto took = std::chrono::steady_clock::now() - start;
  slow.process->signal(SIGCONT);
  ASSERT_FALSE(answer.is_null());
  EXPECT_LT(took, kSendTimeout + seconds(2)) << "answered long after the send timeout";
  EXPECT_EQ(answer["pods"], 3);
  EXPECT_EQ(answer["accepted"], 2) << answer.dump();
  EXPECT_EQ(failures(answer), std::vector<std::string>{"p3 OutcomeUnknown"}) << answer.dump();
  // Woken up, p3 may still deliver the request it read (the outcome was unknown), but once.
  waitFor([&] { return apps_[2]->published("news", "late") > 0; }, seconds(5));
  EXPECT_LE(apps_[2]->published("news", "late"), 1) << "p3 got the publication twice";
  EXPECT_EQ(apps_[0]->published("news", "late"), 1);
  EXPECT_EQ(apps_[1]->published("news", "late"), 1);
  // And it is served again.
  EXPECT_TRUE(
      waitFor([&] { return publish(*sidecars_[1], "again", "a")["accepted"] == 3; }, seconds(10)));
}

TEST_F(SidecarTopicsTest, AnUnreachablePeerIsRetriedUntilTheSendTimeoutOnly) {
  Sidecar& dead = *sidecars_[2];
  dead.process->signal(SIGKILL);
  ASSERT_EQ(dead.process->wait(seconds(10)), 128 + SIGKILL);
  // The stub operator keeps the dead pod in the map: its sidecar refuses connections.
  const auto start = std::chrono::steady_clock::now();
  const json answer = publish(*sidecars_[0], "news", "while-dead");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(answer.is_null());
  EXPECT_LT(took, kSendTimeout + seconds(2));
  EXPECT_EQ(answer["accepted"], 2) << answer.dump();
  EXPECT_EQ(failures(answer), std::vector<std::string>{"p3 SendTimeout"}) << answer.dump();
  EXPECT_EQ(apps_[0]->published("news", "while-dead"), 1);
  EXPECT_EQ(apps_[1]->published("news", "while-dead"), 1);
  EXPECT_EQ(apps_[2]->published("news", "while-dead"), 0);
}

}  // namespace
}  // namespace kshard::sidecar
