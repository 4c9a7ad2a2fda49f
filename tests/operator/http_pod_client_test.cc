// The operator's HTTP PodClient against real peer APIs on 127.0.0.1: each stub pod is the
// sidecar's own PeerApi (sidecar/peer_api.h) over a real EntityRegistry, served by a real
// http::Server. The last test runs a ShardMapController through it on real time.
#include "operator/http_pod_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

#include "base/scheduler.h"
#include "http/factory.h"
#include "kube/jwt_signer.h"
#include "metrics/prometheus_registry.h"
#include "operator/operator_metrics.h"
#include "operator/shard_map_controller.h"
#include "protocol/audiences.h"
#include "sidecar/peer_api.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/routing_table.h"
#include "sidecar/sidecar_metrics.h"
#include "sidecar/token_authorizer.h"
#include "tests/operator/fake_cluster.h"

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;
using testing::FakeDirectory;
using testing::FakeLeadership;
using testing::FakeStore;
using testing::RecordingEvents;

Logger quiet() {
  return Logger("test", LogLevel::kError, [](std::string_view) {});
}

// The app behind a peer: stops entities after `stopDelay` (real time, on the scheduler).
class SlowStopHost final : public sidecar::EntityHost {
 public:
  explicit SlowStopHost(Scheduler& scheduler) : scheduler_(scheduler) {}
  void deliver(sidecar::Message, sidecar::Epoch,
               UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    if (deliverDelay == Duration::zero()) {
      done(http::Response{200, {}, "ok"});
      return;
    }
    auto shared = std::make_shared<UniqueFunction<void(StatusOr<http::Response>&&)>>(
        std::move(done));
    scheduler_.runAfter(deliverDelay, [shared] { (*shared)(http::Response{200, {}, "ok"}); });
  }
  void stop(const sidecar::EntityKey&, sidecar::ShardId, std::uint64_t,
            std::function<void(Status)> done) override {
    scheduler_.runAfter(stopDelay, [done] { done({}); });
  }
  Duration stopDelay = 1ms;
  Duration deliverDelay{0};  // how long the app works on each message

 private:
  Scheduler& scheduler_;
};

// One pod's sidecar peer API on 127.0.0.1.
struct PeerPod {
  // `auth`: who may call; every caller when null.
  PeerPod(std::string name, std::int32_t shards, Duration handoffTimeout,
          sidecar::RequestAuthorizer* auth = nullptr)
      : host(scheduler), registry(host, scheduler, {}, quiet()), metrics(metricsRegistry) {
    identity.pod = std::move(name);
    identity.uid = "uid-" + identity.pod;
    identity.incarnation = "inc-" + identity.pod;
    identity.podIp = "127.0.0.1";
    identity.shardMap = {"demo", "counter"};
    sharding::ShardMap map;
    map.metadata = {"counter", "demo", "u", "1", 1, ""};
    map.spec.shards = shards;
    map.spec.handoffTimeout = handoffTimeout;
    EXPECT_TRUE(table.update(map));
    api = std::make_unique<sidecar::PeerApi>(identity, registry, table, auth ? *auth : authorizer,
                                             metrics, scheduler.clock(), quiet(),
                                             sidecar::PeerApi::Options{});
    http::ServerOptions options;
    options.host = "127.0.0.1";
    server = http::makeServer(http::Backend::kBeast, options);
    api->addRoutes(*server);
    Status s = server->start();
    EXPECT_TRUE(s.ok()) << s.toString();
    address = "127.0.0.1:" + std::to_string(server->port());
    identity.peerAddress = address;
  }
  ~PeerPod() { server->stop(); }

  ThreadScheduler scheduler;
  SlowStopHost host;
  sidecar::EntityRegistry registry;
  sidecar::RoutingTable table;
  sidecar::AllowAllAuthorizer authorizer;
  metrics::PrometheusRegistry metricsRegistry;
  sidecar::SidecarMetrics metrics;
  sidecar::Identity identity;
  std::unique_ptr<sidecar::PeerApi> api;
  std::unique_ptr<http::Server> server;
  std::string address;
};

HttpPodClient::ClientFactory beastClients() {
  return
      [](http::ClientOptions o) { return http::makeClient(http::Backend::kBeast, std::move(o)); };
}

template <typename T>
T await(std::function<void(std::function<void(T)>)> call) {
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  call([promise](T value) { promise->set_value(std::move(value)); });
  EXPECT_EQ(future.wait_for(20s), std::future_status::ready) << "the call never completed";
  return future.get();
}

// Pod `name` of PeerPod, and the sidecar process serving it.
protocol::Target targetOf(const std::string& name) {
  return {name, "uid-" + name, "inc-" + name};
}

protocol::ShardsRequest shards(std::int64_t epoch, std::vector<sharding::ShardId> ids,
                               const std::string& pod = "counter-0") {
  return {"demo/counter", targetOf(pod), static_cast<protocol::Epoch>(epoch),
          sharding::ShardSet::of(ids)};
}

TEST(HttpPodClient, AssignThenPingShowsTheShardsAndTheIdentity) {
  PeerPod pod("counter-0", 30, 5s);
  HttpPodClient client(beastClients());
  auto assigned = await<StatusOr<protocol::AssignResponse>>([&](auto done) {
    client.assign(pod.address, shards(3, {1, 2, 3, 7}), 30, 2s, done);
  });
  ASSERT_TRUE(assigned.ok()) << assigned.status().toString();
  EXPECT_TRUE(assigned->refused.empty());
  auto ping = await<StatusOr<protocol::PingResponse>>([&](auto done) {
    client.ping(pod.address, "demo/counter", targetOf("counter-0"), 2s, done);
  });
  ASSERT_TRUE(ping.ok()) << ping.status().toString();
  EXPECT_EQ(ping->pod, "counter-0");
  EXPECT_EQ(ping->uid, "uid-counter-0");
  EXPECT_EQ(ping->epoch, 3u);
  EXPECT_EQ(ping->shards, "1-3,7");
  EXPECT_EQ(client.clients(), 1u);  // one keep-alive client per pod address
}

TEST(HttpPodClient, ThePingAnswerCarriesTheLoadOfTheShardsThatHadWork) {
  PeerPod pod("counter-0", 30, 5s);
  pod.host.deliverDelay = 20ms;
  HttpPodClient client(beastClients());
  auto assigned = await<StatusOr<protocol::AssignResponse>>(
      [&](auto done) { client.assign(pod.address, shards(3, {1, 7}), 30, 2s, done); });
  ASSERT_TRUE(assigned.ok()) << assigned.status().toString();
  auto answered = std::make_shared<std::promise<void>>();
  sidecar::Message m;
  m.key = {"counter", "hot"};
  m.shard = 7;
  pod.registry.deliver(std::move(m), [answered](sidecar::DeliveryOutcome&&) {
    answered->set_value();
  });
  ASSERT_EQ(answered->get_future().wait_for(20s), std::future_status::ready);
  auto ping = await<StatusOr<protocol::PingResponse>>([&](auto done) {
    client.ping(pod.address, "demo/counter", targetOf("counter-0"), 2s, done);
  });
  ASSERT_TRUE(ping.ok()) << ping.status().toString();
  // Shard 7 had a 20 ms turn; shard 1 had none and is not listed.
  ASSERT_TRUE(ping->load.has_value());
  ASSERT_EQ(ping->load->size(), 1u);
  EXPECT_EQ((*ping->load)[0].first, 7);
  EXPECT_GT((*ping->load)[0].second, 0);
}

// Issue 29: the operator sent one token (audience kshard) to every pod, and every sidecar took it.
// Now the call carries the credentials for the target's ShardMap, and a sidecar takes only its
// own map's.
TEST(HttpPodClient, SendsTheTokenOfTheTargetsShardMapWhichOnlyThatMapsSidecarsTake) {
  const std::string issuer = "https://kubernetes.default.svc.cluster.local";
  const auto signer = kube::JwtSigner::generate("ES256", "k1");
  sidecar::FixedIssuerKeys keys;
  keys.set(issuer, std::move(*kube::JwkSet::parse(signer.jwks())));
  sidecar::RoutingTable registered;
  sidecar::TokenAuthorizer auth(keys, registered, SystemClock::instance(),
                                {.operatorSubject = "system:serviceaccount:kshard-system:kshard",
                                 .ns = "demo",
                                 .shardMap = "demo/counter"});
  PeerPod pod("counter-0", 30, 5s, &auth);
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  // What TokenRequest gives the operator's ServiceAccount (or a pod's) for an audience.
  const auto tokenOf = [&](const std::string& ns, const std::string& sa,
                           const std::string& audience) {
    return "Bearer " + signer.sign(kube::serviceAccountClaims(issuer, audience, ns, sa, sa + "-0",
                                                              "uid", now, now + 600));
  };
  std::vector<std::string> asked;  // the maps whose credentials the client asked for
  std::mutex mu;
  const auto credentialsOf = [&](const std::string& ns, const std::string& sa) {
    return [&, ns, sa](const std::string& map, std::function<void(StatusOr<std::string>)> done) {
      {
        std::lock_guard lock(mu);
        asked.push_back(map);
      }
      done(tokenOf(ns, sa, protocol::sidecarAudience(map)));
    };
  };
  const auto assign = [&](HttpPodClient& client, const std::string& map = "demo/counter") {
    auto request = shards(3, {1, 2});
    request.shardMap = map;
    return await<StatusOr<protocol::AssignResponse>>(
        [&](auto done) { client.assign(pod.address, request, 30, 2s, done); });
  };

  HttpPodClient anonymous(beastClients());
  auto refused = assign(anonymous);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("HTTP 401 Unauthenticated"), std::string::npos)
      << refused.status().toString();
  HttpPodClient aPod(beastClients(), 2s, credentialsOf("demo", "counter"));
  auto forbidden = assign(aPod);
  ASSERT_FALSE(forbidden.ok());
  EXPECT_NE(forbidden.status().message().find("HTTP 403 Forbidden"), std::string::npos)
      << forbidden.status().toString();
  // The operator's token for another map, which that map's pods receive, opens nothing here.
  HttpPodClient otherMapsToken(
      beastClients(), 2s, [&](const std::string&, std::function<void(StatusOr<std::string>)> d) {
        d(tokenOf("kshard-system", "kshard", protocol::sidecarAudience("demo/other")));
      });
  auto replayed = assign(otherMapsToken);
  ASSERT_FALSE(replayed.ok());
  EXPECT_NE(replayed.status().message().find("HTTP 401 Unauthenticated"), std::string::npos)
      << replayed.status().toString();
  EXPECT_TRUE(pod.registry.ownedShards().empty()) << "a refused assign changed the ownership";

  HttpPodClient theOperator(beastClients(), 2s, credentialsOf("kshard-system", "kshard"));
  auto assigned = assign(theOperator);
  ASSERT_TRUE(assigned.ok()) << assigned.status().toString();
  auto ping = await<StatusOr<protocol::PingResponse>>([&](auto done) {
    theOperator.ping(pod.address, "demo/counter", targetOf("counter-0"), 2s, done);
  });
  ASSERT_TRUE(ping.ok()) << ping.status().toString();
  EXPECT_EQ(ping->shards, "1-2");
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(asked, std::vector<std::string>(asked.size(), "demo/counter"));
  }
  auto unassign = await<UnassignAnswer>([&](auto done) {
    aPod.unassign(pod.address, shards(4, {1, 2}), 2s, done);
  });
  EXPECT_FALSE(unassign.status.ok());
  EXPECT_EQ(pod.registry.ownedShards().size(), 2u) << "a refused unassign changed the ownership";
}

TEST(HttpPodClient, ACallWhoseCredentialsCannotBeHadFailsUnsent) {
  PeerPod pod("counter-0", 30, 5s);
  HttpPodClient client(beastClients(), 2s,
                       [](const std::string&, std::function<void(StatusOr<std::string>)> done) {
                         done(unavailable("the API server is away"));
                       });
  auto assigned = await<StatusOr<protocol::AssignResponse>>(
      [&](auto done) { client.assign(pod.address, shards(3, {1}), 30, 2s, done); });
  ASSERT_FALSE(assigned.ok());
  EXPECT_EQ(assigned.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(assigned.status().message().find("demo/counter"), std::string::npos)
      << assigned.status().toString();
  EXPECT_TRUE(pod.registry.ownedShards().empty());
  EXPECT_EQ(client.clients(), 0u) << "a connection was opened for a call without credentials";
}

// Issue 29: an unassign at epoch 2^64 - 1 fenced every shard for good: no assign could pass it.
TEST(HttpPodClient, AnEpochFurtherAheadThanTheOperatorCanHaveIssuedIsRefused) {
  PeerPod pod("counter-0", 30, 5s);  // its copy of the map is at epoch 0
  HttpPodClient client(beastClients());
  for (std::uint64_t epoch :
       {std::numeric_limits<std::uint64_t>::max(), sidecar::kMaxEpochLead + 1}) {
    auto request = shards(0, {1, 2});
    request.epoch = epoch;
    Status s = await<UnassignAnswer>([&](auto done) {
                 client.unassign(pod.address, request, 2s, done);
               }).status;
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << epoch;
    EXPECT_NE(s.message().find("409 EpochTooFarAhead"), std::string::npos) << s.toString();
    auto assign = request;
    auto refused = await<StatusOr<protocol::AssignResponse>>(
        [&](auto done) { client.assign(pod.address, assign, 30, 2s, done); });
    EXPECT_FALSE(refused.ok()) << epoch;
  }
  // Nothing was fenced: the operator's assign at its own epoch is taken.
  auto assigned = await<StatusOr<protocol::AssignResponse>>([&](auto done) {
    client.assign(pod.address, shards(3, {1, 2}), 30, 2s, done);
  });
  ASSERT_TRUE(assigned.ok()) << assigned.status().toString();
  EXPECT_TRUE(assigned->refused.empty()) << assigned->refused.toString();
  // The bound itself is taken.
  auto request = shards(0, {1});
  request.epoch = sidecar::kMaxEpochLead;
  EXPECT_TRUE(await<UnassignAnswer>([&](auto done) {
                client.unassign(pod.address, request, 2s, done);
              }).status.ok());
}

TEST(HttpPodClient, AnAssignOlderThanAnUnassignIsRefusedAsStale) {
  PeerPod pod("counter-0", 30, 5s);
  HttpPodClient client(beastClients());
  auto unassigned = await<UnassignAnswer>([&](auto done) {
    client.unassign(pod.address, shards(5, {4, 5}), 2s, done);
  });
  ASSERT_TRUE(unassigned.status.ok()) << unassigned.status.toString();
  auto assigned = await<StatusOr<protocol::AssignResponse>>([&](auto done) {
    client.assign(pod.address, shards(4, {4, 5, 6}), 30, 2s, done);
  });
  ASSERT_TRUE(assigned.ok());
  EXPECT_EQ(assigned->refused.toString(), "4-5");
  EXPECT_TRUE(pod.registry.owns(6));
  EXPECT_FALSE(pod.registry.owns(4));
}

TEST(HttpPodClient, ACommandMeantForAnotherPodOrSidecarProcessIsRefused) {
  PeerPod pod("counter-0", 30, 5s);
  HttpPodClient client(beastClients());
  // A new pod that got a dead pod's IP, and a sidecar that restarted: neither takes a command
  // meant for the other.
  for (const protocol::Target& other :
       {protocol::Target{"counter-9", "uid-counter-9", "inc-counter-9"},
        protocol::Target{"counter-0", "uid-counter-0", "inc-before-the-restart"}}) {
    auto request = shards(3, {1, 2});
    request.target = other;
    auto assigned = await<StatusOr<protocol::AssignResponse>>(
        [&](auto done) { client.assign(pod.address, request, 30, 2s, done); });
    ASSERT_FALSE(assigned.ok());
    EXPECT_NE(assigned.status().message().find("409 WrongTarget"), std::string::npos)
        << assigned.status().toString();
    auto ping = await<StatusOr<protocol::PingResponse>>(
        [&](auto done) { client.ping(pod.address, "demo/counter", other, 2s, done); });
    EXPECT_FALSE(ping.ok()) << "a ping for " << other.pod << "/" << other.incarnation;
  }
  EXPECT_TRUE(pod.registry.ownedShards().empty()) << "a command for another target was applied";
  ASSERT_TRUE(await<UnassignAnswer>([&](auto done) {
                client.unassign(pod.address, shards(1, {1}), 2s, done);
              }).status.ok());
}

TEST(HttpPodClient, UnassignWaitsForTheHandoffAndReportsABusyShardAsDeadlineExceeded) {
  PeerPod pod("counter-0", 30, 300ms);
  pod.host.stopDelay = 5s;  // the app takes too long to stop its entity
  HttpPodClient client(beastClients());
  ASSERT_TRUE(await<StatusOr<protocol::AssignResponse>>([&](auto done) {
                client.assign(pod.address, shards(1, {9}), 30, 2s, done);
              }).ok());
  sidecar::Message m;
  m.key = {"counter", "x"};
  m.shard = 9;
  m.mode = sidecar::DeliveryMode::kTell;
  pod.registry.deliver(m, [](sidecar::DeliveryOutcome) {});
  const auto start = std::chrono::steady_clock::now();
  const UnassignAnswer answer = await<UnassignAnswer>([&](auto done) {
    client.unassign(pod.address, shards(2, {8, 9}), 3s, done);
  });
  const Status& s = answer.status;
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.toString();
  EXPECT_NE(s.message().find("HandoffTimeout"), std::string::npos) << s.toString();
  // Only the shard whose entity did not stop is named: the operator's throttle counts it alone.
  EXPECT_EQ(answer.busy, std::vector<sharding::ShardId>{9});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HttpPodClient, AClosedPortIsAnError) {
  std::uint16_t port = 0;
  {
    PeerPod gone("gone", 30, 1s);
    port = gone.server->port();
  }
  HttpPodClient client(beastClients());
  auto ping = await<StatusOr<protocol::PingResponse>>([&](auto done) {
    client.ping("127.0.0.1:" + std::to_string(port), "demo/counter", targetOf("gone"), 1s, done);
  });
  EXPECT_FALSE(ping.ok());
  EXPECT_TRUE(ping.status().code() == StatusCode::kUnavailable ||
              ping.status().code() == StatusCode::kDeadlineExceeded)
      << ping.status().toString();
}

TEST(HttpPodClient, ASilentPodTimesOut) {
  // A server that accepts the request and never answers it.
  http::ServerOptions options;
  auto server = http::makeServer(http::Backend::kBeast, options);
  std::vector<http::Responder> held;
  std::mutex mu;
  server->route(http::Method::kGet, "/v1/ping", [&](http::Request, http::Responder r) {
    std::lock_guard lock(mu);
    held.push_back(std::move(r));
  });
  ASSERT_TRUE(server->start().ok());
  HttpPodClient client(beastClients());
  const auto start = std::chrono::steady_clock::now();
  auto ping = await<StatusOr<protocol::PingResponse>>([&](auto done) {
    client.ping("127.0.0.1:" + std::to_string(server->port()), "demo/counter", targetOf("x"), 300ms,
                done);
  });
  EXPECT_EQ(ping.status().code(), StatusCode::kDeadlineExceeded) << ping.status().toString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  {
    std::lock_guard lock(mu);
    held.clear();
  }
  server->stop();
}

TEST(HttpPodClient, ErrorAnswersCarryThePodsCodeAndMessage) {
  PeerPod pod("counter-0", 30, 1s);
  HttpPodClient client(beastClients());
  protocol::ShardsRequest other{"demo/other", targetOf("counter-0"), 1,
                                sharding::ShardSet::of({1})};
  auto r = await<StatusOr<protocol::AssignResponse>>(
      [&](auto done) { client.assign(pod.address, other, 30, 2s, done); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("UnknownShardMap"), std::string::npos)
      << r.status().toString();
}

// The controller on real time, through HTTP, against three peer APIs.
TEST(HttpPodClient, ControllerConvergesThroughRealPeerApis) {
  constexpr std::int32_t kShards = 60;
  std::vector<std::unique_ptr<PeerPod>> peers;
  for (int i = 0; i < 3; ++i) {
    peers.push_back(std::make_unique<PeerPod>("counter-" + std::to_string(i), kShards, 2s));
  }
  // Destroyed first (explicitly, below): no task of the fakes may run after they are gone.
  auto schedulerOwner = std::make_unique<ThreadScheduler>();
  ThreadScheduler& scheduler = *schedulerOwner;
  SeededRandom random(1);
  FakeStore store(scheduler);
  FakeDirectory directory(scheduler);
  FakeLeadership leadership;
  leadership.holderName = "op-0";
  RecordingEvents events;
  metrics::PrometheusRegistry registry;
  OperatorMetrics metrics(registry);
  HttpPodClient pods(beastClients());

  // Everything the fakes hold is touched on the scheduler thread only.
  auto onScheduler = [&](std::function<void()> fn) {
    std::promise<void> done;
    scheduler.runAfter(Duration{0}, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  };
  sharding::ShardMap map;
  map.metadata.name = "counter";
  map.metadata.namespace_ = "demo";
  map.spec.shards = kShards;
  map.spec.rebalanceInterval = 200ms;
  map.spec.rebalanceRetryInterval = 100ms;
  map.spec.rebalanceRate = 1.0;
  map.spec.pingTimeout = 1s;
  map.spec.handoffTimeout = 2s;
  onScheduler([&] {
    store.put(map);
    for (auto& p : peers) {
      PodInfo info;
      info.namespace_ = "demo";
      info.name = p->identity.pod;
      info.uid = p->identity.uid;
      info.phase = "Running";
      info.podIp = "127.0.0.1";
      info.serviceAccount = "default";
      info.labels = {{kShardMapLabel, "counter"}};
      directory.put(info);
    }
  });
  std::shared_ptr<ShardMapController> controller;
  onScheduler([&] { map = *store.get("demo/counter"); });
  ControllerDeps deps{
      scheduler,  random, store,   pods,    directory,
      leadership, events, metrics, quiet(), sharding::ManagerRef{"op-0", "127.0.0.1:7200"}};
  controller = ShardMapController::create(deps, map);
  controller->startLeading();

  auto call = [&](std::function<void(Reply)> send) {
    return await<http::Response>([&](auto done) { send(done); });
  };
  for (auto& p : peers) {
    protocol::RegisterRequest req{p->identity.pod, p->identity.uid, p->address, "1.0.0",
                                  p->identity.incarnation};
    http::Response r = call([&](Reply reply) { controller->registerPod(req, reply); });
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // Every shard held by exactly one peer, each holding what the stored map gives it.
  auto settled = [&](std::size_t live) {
    bool ok = false;
    onScheduler([&] {
      auto m = store.get("demo/counter");
      auto table = sharding::shardTableFromStatus(m->status, kShards);
      if (!table.ok() || m->status.unassignedCount != 0 || m->status.pods.size() != live) return;
      ok = true;
      for (std::size_t i = 0; i < live; ++i) {
        const auto& name = m->status.pods[i].name;
        auto it = std::find_if(peers.begin(), peers.end(),
                               [&](const auto& p) { return p->identity.pod == name; });
        std::vector<sharding::ShardId> expected;
        table->shardsOf(static_cast<sharding::PodIndex>(i)).forEach([&](auto s) {
          expected.push_back(s);
        });
        if ((*it)->registry.ownedShards() != expected || expected.size() < 19) ok = false;
      }
    });
    return ok;
  };
  auto waitFor = [&](const std::function<bool()>& cond, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!cond()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "timed out waiting until " << what;
        return false;
      }
      std::this_thread::sleep_for(20ms);
    }
    return true;
  };
  ASSERT_TRUE(waitFor([&] { return settled(3); }, "60 shards are spread over the three peers"));
  for (int s = 1; s <= kShards; ++s) {
    int holders = 0;
    for (auto& p : peers) holders += p->registry.owns(s) ? 1 : 0;
    EXPECT_EQ(holders, 1) << "shard " << s;
  }
  // Unregister counter-0 through HTTP-driven unassign; the other two take everything.
  protocol::UnregisterRequest un{peers[0]->identity.pod, peers[0]->identity.uid};
  EXPECT_EQ(call([&](Reply reply) { controller->unregisterPod(un, reply); }).status, 200);
  EXPECT_TRUE(peers[0]->registry.ownedShards().empty());
  ASSERT_TRUE(waitFor(
      [&] {
        return peers[1]->registry.ownedShards().size() + peers[2]->registry.ownedShards().size() ==
               static_cast<std::size_t>(kShards);
      },
      "the two remaining peers hold every shard"));
  controller->shutdown();
  onScheduler([&] {});
  controller.reset();
  schedulerOwner.reset();
}

}  // namespace
}  // namespace kshard::manager
