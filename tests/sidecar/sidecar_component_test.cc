// Component test of kshard-sidecar: three real sidecar processes on loopback, each in front of
// a stub app, driven by a stub operator that follows the operator's protocol (unassign, then
// persist a new epoch, then assign). Continuous traffic checks that messages reach the owner,
// that no entity is ever active on two pods while shards move, and that a drain loses no
// acknowledged message.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "http/factory.h"
#include "protocol/wire.h"
#include "sharding/shard_id.h"
#include "sharding/shard_map.h"
#include "sharding/shard_map_json.h"
#include "tests/support/subprocess.h"

namespace kshard::sidecar {
namespace {

using kshard::testing::freeLoopbackPort;
using kshard::testing::Subprocess;
using kshard::testing::waitFor;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int32_t kShards = 64;
// Every sidecar's --max-concurrent-stops: small, so that a drain of a dozen entities queues.
constexpr int kMaxConcurrentStops = 3;

std::unique_ptr<http::Client> client(const std::string& hostPort) {
  http::ClientOptions o;
  o.baseUrl = "http://" + hostPort;
  o.requestTimeout = seconds(30);
  auto c = http::makeClient(http::Backend::kBeast, o);
  if (!c.ok()) throw std::runtime_error(c.status().toString());
  return std::move(*c);
}

// What the stub apps share: which pod runs each entity, and the entities' saved state.
struct World {
  std::mutex mu;
  std::map<std::string, std::string> activeOn;              // entity -> pod
  std::map<std::string, long> saved;                        // entity -> value at its stop
  std::map<std::string, std::map<std::string, long>> live;  // pod -> entity -> value
  std::vector<std::string> violations;
  long activations = 0;
  long stops = 0;
};

// The counter app: an entity holds a number, loaded on its first message, saved on stop.
class StubApp {
 public:
  StubApp(std::string pod, World& world) : pod_(std::move(pod)), world_(world) {
    http::ServerOptions o;
    o.port = freeLoopbackPort();
    server_ = http::makeServer(http::Backend::kBeast, o);
    server_->route(http::Method::kPost, "/kshard/entities/{type}/{id}",
                   [this](http::Request r, http::Responder res) { onMessage(r, res); });
    server_->route(http::Method::kPost, "/kshard/entities/{type}/{id}/stop",
                   [this](http::Request r, http::Responder res) { onStop(r, res); });
    server_->route(http::Method::kPost, "/kshard/reset",
                   [this](http::Request, http::Responder res) { onReset(res); });
    EXPECT_TRUE(server_->start().ok());
  }
  ~StubApp() {
    std::vector<std::thread> delayed;
    {
      std::lock_guard lock(delayedMu_);
      closing_ = true;  // a stop that still comes in is answered at once
      delayed.swap(delayedStops_);
    }
    for (auto& t : delayed) t.join();
  }
  std::uint16_t port() const { return server_->port(); }
  // From now on each stop is answered this long after it arrived (the entity's state is saved
  // at once), so that the stop calls at the app at once can be counted.
  void delayStops(milliseconds delay) { stopDelay_.store(delay.count()); }
  int mostStopsAtOnce() const { return mostStops_.load(); }
  int resets() const { return resets_.load(); }
  std::size_t active() {
    std::lock_guard lock(world_.mu);
    return world_.live[pod_].size();
  }

 private:
  // Saves and forgets every entity of this pod, as the counter example does.
  void onReset(http::Responder& res) {
    {
      std::lock_guard lock(world_.mu);
      auto& mine = world_.live[pod_];
      for (const auto& [id, value] : mine) {
        world_.saved[id] = value;
        if (world_.activeOn[id] == pod_) world_.activeOn.erase(id);
        ++world_.stops;
      }
      mine.clear();
    }
    ++resets_;
    res.send(http::Response::json(200, "{}"));
  }
  void onMessage(const http::Request& r, http::Responder& res) {
    const std::string id(r.param("id"));
    long value;
    {
      std::lock_guard lock(world_.mu);
      auto& mine = world_.live[pod_];
      if (!mine.count(id)) {
        auto it = world_.activeOn.find(id);
        if (it != world_.activeOn.end() && it->second != pod_) {
          world_.violations.push_back(id + " activated on " + pod_ + " while active on " +
                                      it->second);
        }
        world_.activeOn[id] = pod_;
        mine[id] = world_.saved[id];
        ++world_.activations;
      }
      value = ++mine[id];
    }
    res.send(http::Response::json(200, json{{"value", value}, {"pod", pod_}}.dump()));
  }
  void onStop(const http::Request& r, http::Responder& res) {
    const std::string id(r.param("id"));
    {
      std::lock_guard lock(world_.mu);
      auto& mine = world_.live[pod_];
      if (auto it = mine.find(id); it != mine.end()) {
        world_.saved[id] = it->second;
        mine.erase(it);
        if (world_.activeOn[id] == pod_) world_.activeOn.erase(id);
        ++world_.stops;
      }
    }
    const milliseconds delay(stopDelay_.load());
    std::lock_guard lock(delayedMu_);
    if (delay.count() == 0 || closing_) {
      res.send(http::Response::json(200, "{}"));
      return;
    }
    // Only here, under delayedMu_, is the most written.
    if (const int now = ++stopsNow_; now > mostStops_.load()) mostStops_.store(now);
    delayedStops_.emplace_back([this, delay, res = std::move(res)]() mutable {
      std::this_thread::sleep_for(delay);
      --stopsNow_;
      res.send(http::Response::json(200, "{}"));
    });
  }

  std::string pod_;
  World& world_;
  std::atomic<long> stopDelay_{0};  // ms
  std::atomic<int> stopsNow_{0};
  std::atomic<int> mostStops_{0};
  std::atomic<int> resets_{0};
  std::mutex delayedMu_;
  bool closing_ = false;                   // guarded by delayedMu_
  std::vector<std::thread> delayedStops_;  // joined before the server goes
  std::unique_ptr<http::Server> server_;
};

// A minimal operator: the manager API for the sidecars, and shard moves that follow the
// protocol (unassign at epoch+1, persist, assign).
class StubOperator {
 public:
  StubOperator() : table_(kShards) {
    map_.metadata.name = "counter";
    map_.metadata.namespace_ = "demo";
    map_.spec.shards = kShards;
    map_.spec.sendTimeout = seconds(10);
    map_.spec.handoffTimeout = seconds(5);
    map_.spec.entityIdleTimeout = seconds(2);
    http::ServerOptions o;
    o.port = freeLoopbackPort();
    server_ = http::makeServer(http::Backend::kBeast, o);
    const std::string base = "/v1/shardmaps/demo/counter";
    server_->route(http::Method::kPost, base + "/register",
                   [this](http::Request r, http::Responder res) { onRegister(r, res); });
    server_->route(http::Method::kPost, base + "/unregister",
                   [this](http::Request r, http::Responder res) { onUnregister(r, res); });
    server_->route(
        http::Method::kPost, base + "/notify-unhealthy",
        [](http::Request, http::Responder res) { res.send(http::Response::json(202, "{}")); });
    server_->route(http::Method::kPost, base + "/renew",
                   [this](http::Request r, http::Responder res) { onRenew(r, res); });
    server_->route(http::Method::kGet, base + "/assignments",
                   [this](http::Request, http::Responder res) {
                     std::lock_guard lock(mu_);
                     res.send(http::Response::json(200, sharding::toJson(map_).dump()));
                   });
    EXPECT_TRUE(server_->start().ok());
  }
  ~StubOperator() {
    if (reassigner_.joinable()) reassigner_.join();
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  std::vector<std::string> pods() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& p : map_.status.pods) out.push_back(p.name);
    return out;
  }
  std::string ownerOf(sharding::ShardId s) {
    std::lock_guard lock(mu_);
    const auto p = table_.owner(s);
    return p == sharding::kNoPod ? "" : map_.status.pods[static_cast<std::size_t>(p)].name;
  }
  std::vector<sharding::ShardId> shardsOf(const std::string& pod) {
    std::lock_guard lock(mu_);
    std::vector<sharding::ShardId> out;
    const auto idx = indexOf(pod);
    for (sharding::ShardId s = 1; s <= kShards; ++s) {
      if (table_.owner(s) == idx) out.push_back(s);
    }
    return out;
  }

  // Gives every unassigned shard to the pods, round robin.
  void placeUnassigned() {
    std::lock_guard op(opMu_);
    std::map<std::string, std::vector<sharding::ShardId>> plan;
    {
      std::lock_guard lock(mu_);
      std::size_t i = 0;
      for (sharding::ShardId s = 1; s <= kShards; ++s) {
        if (table_.owner(s) != sharding::kNoPod || map_.status.pods.empty()) continue;
        plan[map_.status.pods[i++ % map_.status.pods.size()].name].push_back(s);
      }
    }
    persistAndAssign(plan);
  }

  // Takes `shards` from `pod` and leaves them without an owner until placeUnassigned.
  bool release(const std::string& pod, const std::vector<sharding::ShardId>& shards) {
    std::lock_guard op(opMu_);
    return unassign(pod, shards);
  }

  // Moves `shards` from `from` to `to`: unassign, persist, assign. Returns false when the old
  // owner did not release them (then nothing moves).
  bool move(const std::string& from, const std::string& to,
            const std::vector<sharding::ShardId>& shards) {
    std::lock_guard op(opMu_);
    if (!unassign(from, shards)) return false;
    persistAndAssign({{to, shards}});
    return true;
  }

 private:
  sharding::PodIndex indexOf(const std::string& pod) const {
    for (std::size_t i = 0; i < map_.status.pods.size(); ++i) {
      if (map_.status.pods[i].name == pod) return static_cast<sharding::PodIndex>(i);
    }
    return sharding::kNoPod;
  }
  std::string addressOf(const std::string& pod) {
    std::lock_guard lock(mu_);
    return map_.status.pods[static_cast<std::size_t>(indexOf(pod))].address;
  }
  protocol::Target targetOf(const std::string& pod) {
    std::lock_guard lock(mu_);
    const auto& p = map_.status.pods[static_cast<std::size_t>(indexOf(pod))];
    return {p.name, p.uid, p.incarnation};
  }
  void writeLocked() {
    ++map_.status.epoch;
    sharding::writeShardTable(table_, map_.status);
  }

  bool unassign(const std::string& pod, const std::vector<sharding::ShardId>& shards) {
    std::int64_t fence;
    {
      std::lock_guard lock(mu_);
      fence = map_.status.epoch + 1;
    }
    auto r = command("/v1/shards/unassign", pod, shards, fence);
    if (!r.ok() || r->status != 200) return false;
    std::lock_guard lock(mu_);
    for (auto s : shards) table_.unassign(s);
    writeLocked();  // persist the release before anyone is told to take the shards
    return true;
  }

  void persistAndAssign(const std::map<std::string, std::vector<sharding::ShardId>>& plan) {
    std::int64_t epoch;
    {
      std::lock_guard lock(mu_);
      for (const auto& [pod, shards] : plan) {
        for (auto s : shards) table_.assign(s, indexOf(pod), map_.status.epoch + 1);
      }
      writeLocked();
      epoch = map_.status.epoch;
    }
    for (const auto& [pod, shards] : plan) assignAt(pod, shards, epoch);
  }

  void assignAt(const std::string& pod, const std::vector<sharding::ShardId>& shards,
                std::int64_t epoch) {
    auto r = command("/v1/shards/assign", pod, shards, epoch);
    EXPECT_TRUE(r.ok() && r->status == 200) << "assign to " << pod << " failed";
  }

  // An assign or unassign of `shards` at `epoch`, meant for the process registered as `pod`.
  StatusOr<http::Response> command(const std::string& target, const std::string& pod,
                                   const std::vector<sharding::ShardId>& shards,
                                   std::int64_t epoch) {
    http::Request req;
    req.method = http::Method::kPost;
    req.target = target;
    req.body = protocol::encode(protocol::ShardsRequest{"demo/counter", targetOf(pod),
                                                        static_cast<protocol::Epoch>(epoch),
                                                        sharding::ShardSet::of(shards)});
    return client(addressOf(pod))->sendSync(std::move(req));
  }

  // As the operator: a new pod is added; the same pod again (its sidecar restarted: a new
  // incarnation) keeps its shards, and they are assigned again to the new incarnation.
  void onRegister(const http::Request& r, http::Responder& res) {
    auto req = protocol::decodeRegisterRequest(r.body);
    ASSERT_TRUE(req.ok());
    std::vector<sharding::ShardId> resend;
    std::int64_t epoch;
    {
      std::lock_guard lock(mu_);
      registrations_.push_back(req->pod + "/" + req->incarnation);
      const auto idx = indexOf(req->pod);
      if (idx == sharding::kNoPod) {
        map_.status.pods.push_back(
            {req->pod, req->uid, req->address, req->version, 0, req->incarnation});
        writeLocked();
      } else {
        auto& pod = map_.status.pods[static_cast<std::size_t>(idx)];
        pod.incarnation = req->incarnation;
        pod.address = req->address;
        writeLocked();
        for (sharding::ShardId s = 1; s <= kShards; ++s) {
          if (table_.owner(s) == idx) resend.push_back(s);
        }
      }
      epoch = map_.status.epoch;
    }
    res.send(http::Response::json(
        200, protocol::encode(protocol::EpochResponse{static_cast<protocol::Epoch>(epoch), {}})));
    if (resend.empty()) return;
    if (reassigner_.joinable()) reassigner_.join();
    reassigner_ = std::thread([this, pod = req->pod, resend] {
      std::lock_guard op(opMu_);
      assignAt(pod, resend, [this] {
        std::lock_guard lock(mu_);
        return map_.status.epoch;
      }());
    });
  }

  void onRenew(const http::Request& r, http::Responder& res) {
    auto target = protocol::decodeTarget(r.body);
    ASSERT_TRUE(target.ok());
    std::lock_guard lock(mu_);
    renews_[target->pod]++;
    if (!renewing_.load()) {
      res.send(http::Response::error(503, "Unavailable", "renewals paused by the test"));
      return;
    }
    const auto idx = indexOf(target->pod);
    if (idx == sharding::kNoPod ||
        map_.status.pods[static_cast<std::size_t>(idx)].incarnation != target->incarnation) {
      res.send(http::Response::error(404, protocol::errors::kPodNotAlive, "not registered"));
      return;
    }
    res.send(http::Response::json(200, protocol::encode(protocol::EpochResponse{
                                           static_cast<protocol::Epoch>(map_.status.epoch), {}})));
  }

  // As the operator does (epoch rule 5): the pod releases its shards (its entities stop), then
  // it is taken out, the answer goes back, and its shards are placed elsewhere.
  void onUnregister(const http::Request& r, http::Responder& res) {
    auto req = protocol::decodeUnregisterRequest(r.body);
    ASSERT_TRUE(req.ok());
    {
      std::lock_guard op(opMu_);
      bool known;
      {
        std::lock_guard lock(mu_);
        known = indexOf(req->pod) != sharding::kNoPod;
      }
      if (known) {
        const auto shards = shardsOf(req->pod);
        if (!shards.empty() && !unassign(req->pod, shards)) {
          res.send(http::Response::error(504, protocol::errors::kHandoffTimeout,
                                         "the pod did not release its shards"));
          return;
        }
      }
      std::lock_guard lock(mu_);
      if (const auto idx = indexOf(req->pod); idx != sharding::kNoPod) {
        table_.removePod(idx);
        map_.status.pods.erase(map_.status.pods.begin() + idx);
        writeLocked();
      }
      res.send(http::Response::json(
          200, protocol::encode(protocol::EpochResponse{
                   static_cast<protocol::Epoch>(map_.status.epoch), terminating_.load()})));
    }
    if (!placeOnUnregister_.load()) return;
    if (reassigner_.joinable()) reassigner_.join();
    reassigner_ = std::thread([this] { placeUnassigned(); });
  }

 public:
  // Whether an unregister places the pod's shards on the others at once (the default).
  std::atomic<bool> placeOnUnregister_{true};
  // What an unregister answers about the pod being deleted (a pod's drain is normally followed
  // by its end).
  std::atomic<bool> terminating_{true};
  // Whether renews are granted (false: answered 503, as an unreachable operator).
  std::atomic<bool> renewing_{true};
  std::vector<std::string> registrations() {
    std::lock_guard lock(mu_);
    return registrations_;
  }
  int renews(const std::string& pod) {
    std::lock_guard lock(mu_);
    return renews_[pod];
  }

 private:
  std::mutex opMu_;  // one change at a time, as the operator's rounds
  std::mutex mu_;
  sharding::ShardMap map_;
  sharding::ShardTable table_;
  std::vector<std::string> registrations_;  // "{pod}/{incarnation}", in order
  std::map<std::string, int> renews_;
  std::unique_ptr<http::Server> server_;
  std::thread reassigner_;
};

struct Sidecar {
  std::string pod;
  std::uint16_t apiPort;
  std::uint16_t adminPort;
  std::unique_ptr<Subprocess> process;
  std::unique_ptr<http::Client> api;
  std::unique_ptr<http::Client> peer;
  std::unique_ptr<http::Client> admin;
};

class SidecarComponentTest : public ::testing::Test {
 protected:
  // How the sidecars forward to each other (--peer-transport).
  virtual std::string peerTransport() const { return "channel"; }

  void SetUp() override {
    for (int i = 1; i <= 3; ++i) {
      const std::string pod = "p" + std::to_string(i);
      apps_.push_back(std::make_unique<StubApp>(pod, world_));
      auto sc = std::make_unique<Sidecar>();
      sc->pod = pod;
      sc->apiPort = freeLoopbackPort();
      sc->adminPort = freeLoopbackPort();
      const auto peerPort = freeLoopbackPort();
      sc->process = std::make_unique<Subprocess>(
          std::vector<std::string>{
              KSHARD_SIDECAR_BINARY, "--pod-name=" + pod, "--pod-namespace=demo",
              "--pod-uid=uid-" + pod, "--pod-ip=127.0.0.1", "--shard-map=counter",
              "--version=1.0.0", "--app-port=" + std::to_string(apps_.back()->port()),
              "--api-port=" + std::to_string(sc->apiPort),
              "--peer-port=" + std::to_string(peerPort),
              "--admin-port=" + std::to_string(sc->adminPort), "--admin-bind-address=127.0.0.1",
              "--map-source=manager", "--manager-address=" + operator_.address(),
              "--map-poll-interval=100ms",
              "--max-concurrent-stops=" + std::to_string(kMaxConcurrentStops),
              "--peer-transport=" + peerTransport()},
          std::map<std::string, std::string>{}, ::testing::TempDir() + "/sidecar-" + pod + ".log");
      sc->api = client("127.0.0.1:" + std::to_string(sc->apiPort));
      sc->peer = client("127.0.0.1:" + std::to_string(peerPort));
      sc->admin = client("127.0.0.1:" + std::to_string(sc->adminPort));
      sidecars_.push_back(std::move(sc));
    }
    for (auto& sc : sidecars_) {
      ASSERT_TRUE(waitFor([&] { return ready(*sc); }, seconds(30)))
          << sc->pod << " did not become ready within 30 s; its log:\n"
          << sc->process->logTail();
    }
    operator_.placeUnassigned();
    for (const auto& sc : sidecars_) {
      ASSERT_TRUE(waitFor([&] { return ownedShards(*sc) == operator_.shardsOf(sc->pod).size(); },
                          seconds(10)))
          << sc->pod << " did not take its shards";
    }
  }

  bool ready(Sidecar& sc) {
    http::Request r;
    r.target = "/readyz";
    auto res = sc.admin->sendSync(std::move(r));
    return res.ok() && res->status == 200;
  }
  std::size_t ownedShards(Sidecar& sc) {
    http::Request r;
    r.target = "/v1/shard-map";
    auto res = sc.api->sendSync(std::move(r));
    if (!res.ok() || res->status != 200) return 0;
    auto owned =
        sharding::ShardSet::parse(json::parse(res->body)["owned"].get<std::string>(), kShards);
    return owned.ok() ? static_cast<std::size_t>(owned->size()) : 0;
  }
  // The value of one series of `sc`'s /metrics (name and labels as exported), or nullopt when
  // the series is absent or the scrape failed.
  std::optional<double> metric(Sidecar& sc, const std::string& series) {
    http::Request r;
    r.target = "/metrics";
    auto res = sc.admin->sendSync(std::move(r));
    if (!res.ok() || res->status != 200) return std::nullopt;
    const std::string key = "\n" + series + " ";
    const auto at = res->body.find(key);
    if (at == std::string::npos) return std::nullopt;
    return std::stod(res->body.substr(at + key.size()));
  }
  StatusOr<http::Response> increment(Sidecar& sc, const std::string& id) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = "/v1/entities/counter/" + id;
    r.body = R"({"op":"increment"})";
    return sc.api->sendSync(std::move(r));
  }

  // Sends increments from `threads` threads through the sidecars in `via` until stopped.
  struct Traffic {
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::map<std::string, long> acked;
    std::vector<std::string> failures;
    std::vector<std::thread> threads;
  };
  void startTraffic(Traffic& t, std::atomic<int>& senders, int threads) {
    for (int i = 0; i < threads; ++i) {
      t.threads.emplace_back([this, &t, &senders, i] {
        std::mt19937 rng(static_cast<unsigned>(i + 1));
        while (!t.stop.load()) {
          const std::string id = "e" + std::to_string(rng() % 100);
          Sidecar& sc = *sidecars_[rng() % static_cast<unsigned>(senders.load())];
          auto r = increment(sc, id);
          std::lock_guard lock(t.mu);
          if (r.ok() && r->status == 200) {
            ++t.acked[id];
          } else {
            t.failures.push_back(
                id + " via " + sc.pod + ": " +
                (r.ok() ? std::to_string(r->status) + " " + r->body : r.status().toString()));
          }
        }
      });
    }
  }
  void stopTraffic(Traffic& t) {
    t.stop.store(true);
    for (auto& th : t.threads) th.join();
  }

  World world_;
  StubOperator operator_;
  std::vector<std::unique_ptr<StubApp>> apps_;
  std::vector<std::unique_ptr<Sidecar>> sidecars_;
};

TEST_F(SidecarComponentTest, MessagesReachTheOwnerOfTheirShard) {
  std::map<std::string, int> entitiesOn;  // by owner
  for (int i = 0; i < 60; ++i) {
    const std::string id = "entity-" + std::to_string(i);
    const auto shard = *sharding::shardIdOf(id, kShards);
    Sidecar& via = *sidecars_[static_cast<std::size_t>(i) % sidecars_.size()];
    auto r = increment(via, id);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string owner = operator_.ownerOf(shard);
    EXPECT_EQ(r->headers.get(protocol::kOwnerHeader), owner) << id << " sent via " << via.pod;
    EXPECT_EQ(json::parse(r->body)["pod"], owner) << "the app of another pod ran " << id;
    ++entitiesOn[owner];
  }
  // Each owner's metrics show the entities its app runs and the shards it owns. The map's idle
  // timeout is 2 s, so on a slow run some entities may be passivated meanwhile: the metric and
  // the app's view are read together until they agree, and at least one pod must agree on
  // entities that are still running.
  bool sawRunning = false;
  for (const auto& sc : sidecars_) {
    std::optional<double> shown;
    std::size_t running = 0;
    EXPECT_TRUE(waitFor(
        [&] {
          shown = metric(*sc, R"(kshard_sidecar_active_entities{type="counter"})");
          std::lock_guard lock(world_.mu);
          running = world_.live[sc->pod].size();
          // A type with no active entity has no series.
          return shown.value_or(0.0) == static_cast<double>(running) &&
                 shown.has_value() == (running > 0);
        },
        seconds(10)))
        << sc->pod << " exports " << (shown ? std::to_string(*shown) : std::string("no series"))
        << " active counters while its app runs " << running << " (it got " << entitiesOn[sc->pod]
        << ")";
    sawRunning = sawRunning || running > 0;
    EXPECT_EQ(metric(*sc, "kshard_sidecar_owned_shards"),
              static_cast<double>(operator_.shardsOf(sc->pod).size()))
        << sc->pod;
  }
  EXPECT_TRUE(sawRunning) << "every entity was passivated before the metrics were read";
}

TEST_F(SidecarComponentTest, RejectsBadInputAndKeepsServing) {
  Sidecar& sc = *sidecars_[0];
  const auto post = [&](std::string target, std::string body = "{}") {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = std::move(target);
    r.body = std::move(body);
    return sc.api->sendSync(std::move(r));
  };
  EXPECT_EQ(post("/v1/entities/counter/" + std::string(1025, 'x'))->status, 400);
  EXPECT_EQ(post("/v1/entities/counter/%FF%FE")->status, 400);
  EXPECT_EQ(post("/v1/entities/counter/a?mode=shout")->status, 400);
  EXPECT_EQ(post("/v1/nothing/here")->status, 404);
  // An empty or missing type or id is named as such.
  for (const auto& [target, problem] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/entities/counter/", "entity id: must not be empty"},
           {"/v1/entities/counter", "entity id: must not be empty"},
           {"/v1/entities//a", "entity type: must not be empty"},
           {"/v1/entities//", "entity type: must not be empty"}}) {
    auto r = post(target);
    ASSERT_TRUE(r.ok()) << target << ": " << r.status().toString();
    EXPECT_EQ(r->status, 400) << target;
    EXPECT_NE(r->body.find(problem), std::string::npos) << target << ": " << r->body;
  }
  EXPECT_EQ(post("/v1/entities/counter/a", std::string(5 << 20, 'x'))->status, 413);
  // The same on the peer API, and for malformed JSON from the operator.
  const auto postPeer = [&](std::string target, std::string body) {
    http::Request r;
    r.method = http::Method::kPost;
    r.target = std::move(target);
    r.headers.set("Kshard-Shard", "1");
    r.headers.set("Content-Type", "application/json");
    r.body = std::move(body);
    return sc.peer->sendSync(std::move(r));
  };
  auto emptyId = postPeer("/v1/peer/entities/counter/", "{}");
  ASSERT_TRUE(emptyId.ok()) << emptyId.status().toString();
  EXPECT_EQ(emptyId->status, 400);
  EXPECT_NE(emptyId->body.find("entity id: must not be empty"), std::string::npos) << emptyId->body;
  auto malformed = postPeer("/v1/shards/assign", R"({"shards": [1, 2)");
  ASSERT_TRUE(malformed.ok()) << malformed.status().toString();
  EXPECT_EQ(malformed->status, 400) << malformed->body;
  EXPECT_TRUE(json::accept(malformed->body)) << "not a JSON error: " << malformed->body;
  auto ok = increment(sc, "still-serving");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
}

// The invariants hold whichever way the sidecars forward to each other.
class SidecarComponentTransportTest : public SidecarComponentTest,
                                      public ::testing::WithParamInterface<std::string> {
 protected:
  std::string peerTransport() const override { return GetParam(); }
};

TEST_P(SidecarComponentTransportTest,
       ShardsMovedUnderTrafficAreNeverServedTwiceAndDrainLosesNothing) {
  Traffic traffic;
  std::atomic<int> senders{3};
  startTraffic(traffic, senders, 4);
  std::mt19937 rng(7);

  // Move shards around under traffic.
  for (int round = 0; round < 12; ++round) {
    const auto pods = operator_.pods();
    const std::size_t f = rng() % pods.size();
    const std::string from = pods[f];
    const std::string to = pods[(f + 1 + rng() % (pods.size() - 1)) % pods.size()];
    auto owned = operator_.shardsOf(from);
    std::shuffle(owned.begin(), owned.end(), rng);
    owned.resize(std::min<std::size_t>(owned.size(), 6));
    EXPECT_TRUE(operator_.move(from, to, owned)) << "unassign of " << from << " failed";
    std::this_thread::sleep_for(milliseconds(150));
  }

  // Drain p3 under traffic: stop sending through it, then SIGTERM.
  senders.store(2);
  std::this_thread::sleep_for(milliseconds(100));
  sidecars_[2]->process->signal(SIGTERM);
  const int exitCode = sidecars_[2]->process->wait(seconds(30));
  EXPECT_EQ(exitCode, 0) << "p3 did not drain cleanly; its log:\n"
                         << sidecars_[2]->process->logTail();
  ASSERT_TRUE(waitFor([&] { return operator_.pods().size() == 2; }, seconds(10)));
  ASSERT_TRUE(waitFor(
      [&] {
        return operator_.shardsOf("p1").size() + operator_.shardsOf("p2").size() ==
               static_cast<std::size_t>(kShards);
      },
      seconds(10)))
      << "p3's shards were not placed on the other pods";
  std::this_thread::sleep_for(milliseconds(500));
  stopTraffic(traffic);

  std::lock_guard lock(world_.mu);
  EXPECT_TRUE(world_.violations.empty())
      << world_.violations.size() << " violations, first: " << world_.violations.front();
  // Over channels nothing fails: the exiting sidecar's goaway says which requests it took. Over
  // plain HTTP a request that met the exiting sidecar closing its idle keep-alive connection
  // cannot be told from one its sidecar took and crashed on: it fails OutcomeUnknown and is
  // not sent again (it was not applied here, which the counters below confirm).
  std::vector<std::string> unexpected;
  for (const auto& f : traffic.failures) {
    const bool exitRace = GetParam() == "http" && f.find("OutcomeUnknown") != std::string::npos &&
                          f.find("owner p3") != std::string::npos;
    if (!exitRace) unexpected.push_back(f);
  }
  EXPECT_TRUE(unexpected.empty())
      << unexpected.size() << " failed requests, first: " << unexpected.front();
  long total = 0;
  for (const auto& [id, acked] : traffic.acked) {
    long value = world_.saved.count(id) ? world_.saved.at(id) : 0;
    auto on = world_.activeOn.find(id);
    if (on != world_.activeOn.end()) value = world_.live[on->second][id];
    EXPECT_EQ(value, acked) << id << ": the counter does not match the increments acknowledged";
    total += acked;
  }
  EXPECT_GT(total, 200) << "too little traffic to mean anything";
  EXPECT_GT(world_.stops, 0) << "no entity was ever stopped: no handoff happened";
}

INSTANTIATE_TEST_SUITE_P(PeerTransports, SidecarComponentTransportTest,
                         ::testing::Values("channel", "http"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// A drain stops the pod's entities through its app at most --max-concurrent-stops at a time, and
// every entity's state is saved before the sidecar exits.
TEST_F(SidecarComponentTest, ADrainStopsEntitiesAFewAtATimeAndSavesEveryOne) {
  Sidecar& leaving = *sidecars_[2];
  std::vector<std::string> ids;  // entities whose shards p3 owns
  for (int i = 0; ids.size() < 12; ++i) {
    const std::string id = "drained-" + std::to_string(i);
    if (operator_.ownerOf(*sharding::shardIdOf(id, kShards)) == "p3") ids.push_back(id);
  }
  for (const auto& id : ids) {
    auto r = increment(leaving, id);
    ASSERT_TRUE(r.ok() && r->status == 200)
        << id << ": " << (r.ok() ? r->body : r.status().toString());
  }
  apps_[2]->delayStops(milliseconds(100));
  leaving.process->signal(SIGTERM);
  EXPECT_EQ(leaving.process->wait(seconds(30)), 0) << "p3 did not drain cleanly; its log:\n"
                                                   << leaving.process->logTail();
  EXPECT_EQ(apps_[2]->mostStopsAtOnce(), kMaxConcurrentStops)
      << "the app did not see the drain's stop calls " << kMaxConcurrentStops << " at a time";
  std::lock_guard lock(world_.mu);
  EXPECT_TRUE(world_.live["p3"].empty())
      << world_.live["p3"].size() << " entities still active at p3's app after its drain";
  for (const auto& id : ids) EXPECT_EQ(world_.saved[id], 1) << id << " was not saved by its stop";
}

// A request of the app that is still waiting for its shard's owner when the sidecar gets SIGTERM
// (after its drain) is answered, not cut: the app API closes to new connections and waits up to
// sendTimeout, with the ShardMap still followed. An end-to-end scale-down once lost such a request.
TEST_F(SidecarComponentTest, AnAppRequestInFlightAtExitIsAnsweredOnceItsShardHasAnOwner) {
  Sidecar& leaving = *sidecars_[2];
  // An entity whose shard p1 gives up, and nobody takes until the test says so.
  std::string id;
  for (int i = 0; id.empty(); ++i) {
    const std::string candidate = "orphan-" + std::to_string(i);
    if (operator_.ownerOf(*sharding::shardIdOf(candidate, kShards)) == "p1") id = candidate;
  }
  const auto shard = *sharding::shardIdOf(id, kShards);
  operator_.placeOnUnregister_.store(false);
  ASSERT_TRUE(operator_.release("p1", {shard}));
  const auto retriesNoOwner = [&] {
    return metric(leaving, R"(kshard_sidecar_retries_total{reason="no_owner"})").value_or(0.0);
  };
  const double retriesBefore = retriesNoOwner();
  auto inFlight = std::async(std::launch::async, [&] { return increment(leaving, id); });
  ASSERT_TRUE(waitFor([&] { return retriesNoOwner() > retriesBefore; }, seconds(5)))
      << "the request through p3 never waited for an owner";

  leaving.process->signal(SIGTERM);
  // The exit has begun once the app API refuses new connections (the drain and unregister
  // come before it).
  const std::string apiAddress = "127.0.0.1:" + std::to_string(leaving.apiPort);
  ASSERT_TRUE(waitFor(
      [&] {
        http::Request r;
        r.target = "/v1/shard-map";
        return !client(apiAddress)->sendSync(std::move(r)).ok();
      },
      seconds(15)))
      << "p3's app API still takes new connections after SIGTERM; its log:\n"
      << leaving.process->logTail();
  // Longer than the old 1 s given to requests in flight, shorter than sendTimeout (10 s).
  std::this_thread::sleep_for(seconds(2));
  operator_.placeUnassigned();

  ASSERT_EQ(inFlight.wait_for(seconds(15)), std::future_status::ready)
      << "the request in flight got no answer";
  auto r = inFlight.get();
  ASSERT_TRUE(r.ok()) << "the request in flight was cut: " << r.status().toString();
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->headers.get(protocol::kOwnerHeader), "p3");
  EXPECT_EQ(leaving.process->wait(seconds(15)), 0) << leaving.process->logTail();
}

}  // namespace
}  // namespace kshard::sidecar
