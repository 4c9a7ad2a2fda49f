// PeerApi::admit: the peer server authenticates its callers from their requests' heads, before
// any body is read, with the credential each path needs. And what the forwarded-message route
// refuses.
#include "sidecar/peer_api.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "http/factory.h"
#include "metrics/prometheus_registry.h"
#include "protocol/wire.h"
#include "sharding/shard_id.h"
#include "tests/sidecar/held_host.h"
#include "tests/sidecar/map_fixture.h"

namespace kshard::sidecar {
namespace {

// Takes the operator's calls with "Bearer operator", the peers' with "Bearer peer", and says
// which check each head went through.
class RecordingAuthorizer final : public RequestAuthorizer {
 public:
  Status authorizeOperator(const http::Request& request) override {
    checks.push_back("operator " + request.target);
    return check(request, "Bearer operator");
  }
  Status authorizePeer(const http::Request& request) override {
    checks.push_back("peer " + request.target);
    return check(request, "Bearer peer");
  }
  Status authorizeManagerAnswer(const http::Request&) override {
    return Status(StatusCode::kUnauthenticated, "no answers here");
  }
  // "Bearer later": a peer token whose pod is not registered yet, good enough to be admitted.
  Status admitPeer(const http::Request& head) override {
    checks.push_back("admit peer " + head.target);
    if (head.headers.get("authorization") == std::optional<std::string_view>("Bearer later")) {
      return {};
    }
    return check(head, "Bearer peer");
  }
  std::vector<std::string> checks;

 private:
  static Status check(const http::Request& request, std::string_view wanted) {
    const auto got = request.headers.get("authorization");
    if (!got) return unauthenticated("no token");
    if (*got == "Bearer later") return unavailable("not yet in this sidecar's view");
    if (*got == "Bearer nokeys") return unavailable("the issuer keys are not loaded yet");
    if (*got != wanted) return permissionDenied("someone else");
    return {};
  }
};

// The route's parts, for a pod p1 of a map that the tests fill in.
class PeerApiTest : public ::testing::Test {
 protected:
  static Identity p1() {
    Identity self;
    self.pod = "p1";
    return self;
  }

  Logger quiet_{"t", LogLevel::kError, [](std::string_view) {}};
  ManualScheduler scheduler_;
  testing::HeldHost host_;
  EntityRegistry registry_{host_, scheduler_, {}, quiet_};
  RoutingTable table_;
  metrics::PrometheusRegistry metricsRegistry_;
  SidecarMetrics metrics_{metricsRegistry_};
  RecordingAuthorizer authorizer_;
  PeerApi api_{p1(), registry_, table_, authorizer_, metrics_, scheduler_.clock(), quiet_, {}};
};

class PeerApiAdmitTest : public PeerApiTest {
 protected:
  std::optional<http::Response> admit(http::Method method, std::string target,
                                      std::string token = "") {
    http::Request head;
    head.method = method;
    head.target = std::move(target);
    if (!token.empty()) head.headers.add("Authorization", token);
    return api_.admit(head);
  }
};

TEST_F(PeerApiAdmitTest, EachPathNeedsTheCredentialOfItsCaller) {
  EXPECT_FALSE(admit(http::Method::kGet, "/v1/ping", "Bearer operator"));
  EXPECT_FALSE(admit(http::Method::kPost, "/v1/shards/assign", "Bearer operator"));
  EXPECT_FALSE(admit(http::Method::kPost, "/v1/shards/unassign?x=1", "Bearer operator"));
  EXPECT_FALSE(admit(http::Method::kPost, "/v1/peer/entities/counter/a", "Bearer peer"));
  EXPECT_FALSE(admit(http::Method::kGet, "/v1/channel", "Bearer peer"));
  EXPECT_EQ(authorizer_.checks,
            (std::vector<std::string>{"operator /v1/ping", "operator /v1/shards/assign",
                                      "operator /v1/shards/unassign?x=1",
                                      "admit peer /v1/peer/entities/counter/a",
                                      "admit peer /v1/channel"}));
}

TEST_F(PeerApiAdmitTest, ARefusalIsTheAnswerTheRoutesWouldGive) {
  const auto none = admit(http::Method::kPost, "/v1/peer/entities/counter/a");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  const auto peerAsOperator = admit(http::Method::kPost, "/v1/shards/unassign", "Bearer peer");
  ASSERT_TRUE(peerAsOperator);
  EXPECT_EQ(peerAsOperator->status, 403);
  const auto operatorAsPeer = admit(http::Method::kGet, "/v1/channel", "Bearer operator");
  ASSERT_TRUE(operatorAsPeer);
  EXPECT_EQ(operatorAsPeer->status, 403);
  // A pod registered a moment ago is no stranger: it gets a channel, and the route answers its
  // messages 503 until this sidecar sees it registered.
  EXPECT_FALSE(admit(http::Method::kGet, "/v1/channel", "Bearer later"));
  EXPECT_FALSE(admit(http::Method::kPost, "/v1/peer/entities/counter/a", "Bearer later"));
  // While no token can be verified, nobody's body is read.
  const auto noKeys = admit(http::Method::kPost, "/v1/peer/entities/counter/a", "Bearer nokeys");
  ASSERT_TRUE(noKeys);
  EXPECT_EQ(noKeys->status, 503);
  // A path no route takes gets the router's 404, its body unread.
  const auto other = admit(http::Method::kPost, "/v1/no-such-thing");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_NE(other->body.find("no route for POST /v1/no-such-thing"), std::string::npos)
      << other->body;
}

// A forwarded message reaching the route, through a real server: the map has shards 1-4, all
// this pod's, and declares the singleton "ticker".
class PeerApiForwardTest : public PeerApiTest {
 protected:
  void SetUp() override {
    sharding::ShardMap map = testing::makeMap(4, 1, {{"p1", "1-4"}});
    map.spec.singletons = {"ticker"};
    ASSERT_TRUE(table_.update(map));
    api_.addRoutes(*server_);
    ASSERT_TRUE(server_->start().ok());
    http::ClientOptions o;
    o.baseUrl = "http://127.0.0.1:" + std::to_string(server_->port());
    client_ = std::move(*http::makeClient(http::Backend::kBeast, o));
    ASSERT_TRUE(registry_.assign({1, 2, 3, 4}, 1).empty());
  }
  void TearDown() override { server_->stop(); }

  // A tell to `path` (below /v1/peer/), with the shard of "ticker".
  StatusOr<http::Response> tell(const std::string& path) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/v1/peer/" + path;
    r.headers.add("Authorization", "Bearer peer");
    r.headers.add(std::string(protocol::kShardHeader),
                  std::to_string(*sharding::shardIdOf("ticker", 4)));
    r.headers.add(std::string(protocol::kModeHeader), "tell");
    return client_->sendSync(std::move(r));
  }

  std::unique_ptr<http::Server> server_ = http::makeServer(http::Backend::kBeast, {});
  std::unique_ptr<http::Client> client_;
};

// The singletons' entity type is reserved on the peer route too: a sidecar older than the
// reservation (which its app API does not refuse) could forward a message of that type.
TEST_F(PeerApiForwardTest, TheSingletonTypeIsRefusedOnTheEntityRoute) {
  auto singleton = tell("entities/kshard.io%2Fsingleton/ticker");
  ASSERT_TRUE(singleton.ok()) << singleton.status().toString();
  EXPECT_EQ(singleton->status, 400) << singleton->body;
  EXPECT_EQ(registry_.activeEntities(), 0u) << "a singleton was started by a forwarded message";
  auto counter = tell("entities/counter/ticker");
  ASSERT_TRUE(counter.ok()) << counter.status().toString();
  EXPECT_EQ(counter->status, 202) << counter->body;
}

// Only the spec's singletons exist on this pod, whatever the sender believes.
TEST_F(PeerApiForwardTest, ASingletonNotInTheSpecIsNotStarted) {
  auto other = tell("singletons/other");
  ASSERT_TRUE(other.ok()) << other.status().toString();
  EXPECT_EQ(other->status, 404) << other->body;
  EXPECT_NE(other->body.find("no singleton other in the ShardMap's spec.singletons"),
            std::string::npos)
      << other->body;
  EXPECT_EQ(registry_.activeEntities(), 0u) << "an undeclared singleton was started";
  auto ticker = tell("singletons/ticker");
  ASSERT_TRUE(ticker.ok()) << ticker.status().toString();
  EXPECT_EQ(ticker->status, 202) << ticker->body;
  EXPECT_EQ(registry_.activeEntities(), 1u);
}

}  // namespace
}  // namespace kshard::sidecar
