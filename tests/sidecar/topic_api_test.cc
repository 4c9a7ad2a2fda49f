// TopicApi over real HTTP servers on loopback: the peer route takes publications only from
// authenticated peers, and both routes refuse malformed topics before anything is delivered.
#include "sidecar/topic_api.h"

#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "http/factory.h"
#include "metrics/prometheus_registry.h"
#include "protocol/wire.h"
#include "sidecar/peer_api.h"
#include "tests/sidecar/held_host.h"
#include "tests/sidecar/held_topics.h"
#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

using nlohmann::json;
using testing::makeMap;

// Peers present "Bearer peer"; "Bearer later" is a peer whose pod this sidecar has not seen
// registered yet (admitted, refused by the route).
class PeerTokens final : public RequestAuthorizer {
 public:
  Status authorizeOperator(const http::Request&) override { return permissionDenied("no"); }
  Status authorizePeer(const http::Request& request) override {
    const auto got = request.headers.get("authorization");
    if (!got) return unauthenticated("no token");
    if (*got == "Bearer later") return unavailable("not yet in this sidecar's view");
    if (*got != "Bearer peer") return unauthenticated("not a peer token of this map");
    return {};
  }
  Status authorizeManagerAnswer(const http::Request&) override { return permissionDenied("no"); }
  Status admitPeer(const http::Request& head) override {
    if (head.headers.get("authorization") == std::optional<std::string_view>("Bearer later")) {
      return {};
    }
    return authorizePeer(head);
  }
};

// The app's topic callback: records each publication and takes it at once.
class RecordingTopicHost final : public TopicHost {
 public:
  void deliverTopic(std::shared_ptr<const Publication> publication,
                    UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    {
      std::lock_guard lock(mu_);
      got_.push_back(std::move(publication));
    }
    done(http::Response::json(200, "{}"));
  }
  std::vector<std::shared_ptr<const Publication>> got() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<const Publication>> got_;
};

std::unique_ptr<http::Client> clientOf(const http::Server& server) {
  http::ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(server.port());
  return std::move(*http::makeClient(http::Backend::kBeast, o));
}

class TopicApiTest : public ::testing::Test {
 protected:
  TopicApiTest() {
    http::ServerOptions o;
    o.maxBodyBytes = 64 * 1024;
    appServer_ = http::makeServer(http::Backend::kBeast, o);
    api_.addAppRoutes(*appServer_);
    o.admit = [this](const http::Request& head) { return peerApi_.admit(head); };
    peerServer_ = http::makeServer(http::Backend::kBeast, o);
    api_.addPeerRoutes(*peerServer_);
    EXPECT_TRUE(appServer_->start().ok());
    EXPECT_TRUE(peerServer_->start().ok());
    app_ = clientOf(*appServer_);
    peer_ = clientOf(*peerServer_);
  }
  ~TopicApiTest() override {
    appServer_->stop();
    peerServer_->stop();
  }

  StatusOr<http::Response> post(http::Client& client, std::string target, std::string body,
                                std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = std::move(target);
    r.body = std::move(body);
    for (const auto& [name, value] : headers) r.headers.add(name, value);
    return client.sendSync(std::move(r));
  }

  Logger quiet_{"t", LogLevel::kError, [](std::string_view) {}};
  Identity identity_ = [] {
    Identity self;
    self.pod = "p1";
    return self;
  }();
  ManualScheduler scheduler_;
  testing::HeldHost host_;
  EntityRegistry registry_{host_, scheduler_, {}, quiet_};
  RoutingTable table_;
  metrics::PrometheusRegistry metricsRegistry_;
  SidecarMetrics metrics_{metricsRegistry_};
  PeerTokens authorizer_;
  RecordingTopicHost topicHost_;
  TopicDelivery delivery_{registry_, topicHost_};
  testing::HeldPublishes peers_{scheduler_.clock()};
  class NoReports final : public UnhealthyReporter {
    void reportUnreachable(const std::string&) override {}
  } reporter_;
  SeededRandom random_{1};
  TopicPublisher publisher_{table_,  delivery_, peers_,   reporter_, scheduler_,
                            random_, {"p1"},    metrics_, quiet_};
  PeerApi peerApi_{identity_, registry_,          table_, authorizer_,
                   metrics_,  scheduler_.clock(), quiet_, {}};
  TopicApi api_{identity_, publisher_, delivery_, table_, authorizer_};
  std::unique_ptr<http::Server> appServer_;
  std::unique_ptr<http::Server> peerServer_;
  std::unique_ptr<http::Client> app_;
  std::unique_ptr<http::Client> peer_;
};

TEST_F(TopicApiTest, AnUnauthenticatedPeerPublicationIsRefusedAndReachesNoApp) {
  auto none = post(*peer_, "/v1/peer/topics/news", "x");
  ASSERT_TRUE(none.ok()) << none.status().toString();
  EXPECT_EQ(none->status, 401) << none->body;
  auto forged = post(*peer_, "/v1/peer/topics/news", "x", {{"Authorization", "Bearer forged"}});
  ASSERT_TRUE(forged.ok());
  EXPECT_EQ(forged->status, 401) << forged->body;
  // Admitted (a peer token) but its pod not known here yet: the route refuses it, and the
  // publisher may try again (nothing was delivered).
  auto later = post(*peer_, "/v1/peer/topics/news", "x", {{"Authorization", "Bearer later"}});
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->status, 503) << later->body;
  EXPECT_EQ(later->headers.get(protocol::kErrorHeader),
            protocol::errors::kAuthenticationUnavailable);
  EXPECT_TRUE(topicHost_.got().empty()) << "a refused caller's publication reached the app";
}

TEST_F(TopicApiTest, AnAuthenticatedPeerPublicationReachesTheAppWithItsHeadersOnly) {
  auto r = post(*peer_, "/v1/peer/topics/news%2Fsport", "hello",
                {{"Authorization", "Bearer peer"},
                 {"Kshard-Publisher", "p2"},
                 {"Kshard-Owner", "p9"},
                 {"Content-Type", "text/plain"}});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["pod"], "p1");
  EXPECT_EQ(body["entities"], 0);
  const auto got = topicHost_.got();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]->topic, "news/sport");
  EXPECT_EQ(got[0]->publisher, "p2");
  EXPECT_EQ(got[0]->body, "hello");
  EXPECT_EQ(got[0]->headers.get("Content-Type"), "text/plain");
  EXPECT_FALSE(got[0]->headers.get("Kshard-Owner")) << "a Kshard-* field passed through";
  EXPECT_FALSE(got[0]->headers.get("Authorization")) << "the peer's token passed through";
}

TEST_F(TopicApiTest, BadTopicsAreRefusedOnBothRoutes) {
  ASSERT_TRUE(table_.update(makeMap(4, 1, {{"p1", "1-4"}})));
  for (const std::string& target :
       {std::string("/v1/topics/"), std::string("/v1/topics"), std::string("/v1/topics/%2E%2E"),
        std::string("/v1/topics/a%0D%0AX-Injected:%201"), std::string("/v1/topics/%FF"),
        "/v1/topics/" + std::string(254, 't'), std::string("/v1/topics/news?entities="),
        std::string("/v1/topics/news?entities=%FF"),
        std::string("/v1/topics/news?entities=kshard.io%2Fsingleton")}) {
    auto app = post(*app_, target, "x");
    ASSERT_TRUE(app.ok()) << target << ": " << app.status().toString();
    EXPECT_EQ(app->status, 400) << target << ": " << app->body;
    auto peer =
        post(*peer_, "/v1/peer" + target.substr(3), "x", {{"Authorization", "Bearer peer"}});
    ASSERT_TRUE(peer.ok()) << target << ": " << peer.status().toString();
    EXPECT_EQ(peer->status, 400) << "/v1/peer" << target.substr(3) << ": " << peer->body;
  }
  auto large = post(*app_, "/v1/topics/news", std::string(65 * 1024, 'x'));
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->status, 413);
  EXPECT_TRUE(topicHost_.got().empty());
  EXPECT_TRUE(peers_.calls.empty());
}

TEST_F(TopicApiTest, APublishIsAnsweredWithWhatEveryPodMadeOfIt) {
  auto early = post(*app_, "/v1/topics/news", "x");
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->status, 503) << "published before the map was loaded: " << early->body;

  ASSERT_TRUE(table_.update(makeMap(4, 1, {{"p1", "1-4"}})));
  auto r = post(*app_, "/v1/topics/news", "hello",
                {{"Content-Type", "text/plain"}, {"Kshard-Publisher", "p7"}});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["topic"], "news");
  EXPECT_EQ(body["pods"], 1);
  EXPECT_EQ(body["accepted"], 1);
  EXPECT_EQ(body["entities"], 0);
  EXPECT_EQ(body["failed"], json::array());
  const auto got = topicHost_.got();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]->publisher, "p1") << "the app named another publisher than its pod";
  EXPECT_EQ(got[0]->headers.get("Content-Type"), "text/plain");
}

}  // namespace
}  // namespace kshard::sidecar
