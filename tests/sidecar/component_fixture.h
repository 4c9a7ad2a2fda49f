// The sidecar component tests' world (tests/sidecar/sidecar_component_test.cc,
// tests/sidecar/sidecar_faults_test.cc): three real sidecar processes on loopback, each in front
// of a stub app, driven by a stub operator that follows the operator's protocol (unassign, then
// persist a new epoch, then assign), and a shared record of which pod runs each entity, so that
// a test can check that no entity is ever active on two pods and no acknowledged message is lost.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
  std::map<std::string, std::size_t> mostLive;              // pod -> most entities at once
  std::vector<std::string> violations;
  long activations = 0;
  long stops = 0;
  long starts = 0;  // start callbacks (entities and singletons kept active)
};

// The counter app: an entity holds a number, loaded on its first message, saved on stop.
class StubApp {
 public:
  StubApp(std::string pod, World& world) : pod_(std::move(pod)), world_(world) {
    http::ServerOptions o;
    o.port = freeLoopbackPort();
    server_ = http::makeServer(http::Backend::kBeast, o);
    server_->route(http::Method::kPost, "/kshard/entities/{type}/{id}",
                   [this](http::Request r, http::Responder res) {
                     onMessage(r, res, std::string(r.param("id")));
                   });
    server_->route(
        http::Method::kPost, "/kshard/entities/{type}/{id}/stop",
        [this](http::Request r, http::Responder res) { onStop(res, std::string(r.param("id"))); });
    server_->route(
        http::Method::kPost, "/kshard/entities/{type}/{id}/start",
        [this](http::Request r, http::Responder res) { onStart(res, std::string(r.param("id"))); });
    // A singleton is recorded in the World as the entity "singleton:{name}".
    server_->route(http::Method::kPost, "/kshard/singletons/{name}",
                   [this](http::Request r, http::Responder res) {
                     onMessage(r, res, singletonEntity(r.param("name")));
                   });
    server_->route(http::Method::kPost, "/kshard/singletons/{name}/start",
                   [this](http::Request r, http::Responder res) {
                     onStart(res, singletonEntity(r.param("name")));
                   });
    server_->route(http::Method::kPost, "/kshard/singletons/{name}/stop",
                   [this](http::Request r, http::Responder res) {
                     onStop(res, singletonEntity(r.param("name")));
                   });
    server_->route(http::Method::kPost, "/kshard/reset",
                   [this](http::Request, http::Responder res) { onReset(res); });
    server_->route(http::Method::kPost, "/kshard/topics/{topic}",
                   [this](http::Request r, http::Responder res) {
                     std::lock_guard lock(heldMu_);
                     topics_[std::string(r.param("topic")) + " " + r.body]++;
                     res.send(http::Response::json(200, "{}"));
                   });
    EXPECT_TRUE(server_->start().ok());
  }
  // How many times the topic callback got `body` published to `topic`.
  int published(const std::string& topic, const std::string& body) {
    std::lock_guard lock(heldMu_);
    return topics_[topic + " " + body];
  }
  ~StubApp() {
    releaseHeld();
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
  // From now on messages are applied at once but answered only by releaseHeld(): a message the
  // app has taken and not yet answered.
  void holdAnswers(bool hold) { holding_.store(hold); }
  std::size_t held() {
    std::lock_guard lock(heldMu_);
    return held_.size();
  }
  void releaseHeld() {
    std::vector<std::pair<http::Responder, http::Response>> out;
    {
      std::lock_guard lock(heldMu_);
      out.swap(held_);
    }
    for (auto& [res, answer] : out) res.send(std::move(answer));
  }
  // The pod's end, as its app sees it: its entities are gone, unsaved.
  void crash() {
    std::lock_guard lock(world_.mu);
    for (const auto& [id, value] : world_.live[pod_]) {
      if (world_.activeOn[id] == pod_) world_.activeOn.erase(id);
    }
    world_.live[pod_].clear();
  }
  static std::string singletonEntity(std::string_view name) {
    return "singleton:" + std::string(name);
  }
  // How many messages this app received for `id`.
  int received(const std::string& id) {
    std::lock_guard lock(heldMu_);
    return received_[id];
  }
  // The Idempotency-Key of the last message for `id`, if it had one.
  std::string idempotencyKey(const std::string& id) {
    std::lock_guard lock(heldMu_);
    return keys_[id];
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
  // Loads `id` on this pod unless it is active here, recording a second pod as a violation.
  void activateLocked(const std::string& id) {
    auto& mine = world_.live[pod_];
    if (mine.count(id)) return;
    auto it = world_.activeOn.find(id);
    if (it != world_.activeOn.end() && it->second != pod_) {
      world_.violations.push_back(id + " activated on " + pod_ + " while active on " + it->second);
    }
    world_.activeOn[id] = pod_;
    mine[id] = world_.saved[id];
    ++world_.activations;
    world_.mostLive[pod_] = std::max(world_.mostLive[pod_], mine.size());
  }
  void onStart(http::Responder& res, const std::string& id) {
    {
      std::lock_guard lock(world_.mu);
      activateLocked(id);
      ++world_.starts;
    }
    res.send(http::Response::json(200, "{}"));
  }
  void onMessage(const http::Request& r, http::Responder& res, const std::string& id) {
    long value;
    {
      std::lock_guard lock(world_.mu);
      activateLocked(id);
      value = ++world_.live[pod_][id];
    }
    http::Response answer = http::Response::json(200, json{{"value", value}, {"pod", pod_}}.dump());
    {
      std::lock_guard lock(heldMu_);
      ++received_[id];
      keys_[id] = std::string(r.headers.get(protocol::kIdempotencyKeyHeader).value_or(""));
      if (holding_.load()) {
        held_.emplace_back(std::move(res), std::move(answer));
        return;
      }
    }
    res.send(std::move(answer));
  }
  void onStop(http::Responder& res, const std::string& id) {
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
  std::atomic<bool> holding_{false};
  std::mutex heldMu_;
  std::vector<std::pair<http::Responder, http::Response>> held_;
  std::map<std::string, int> received_;
  std::map<std::string, std::string> keys_;
  std::map<std::string, int> topics_;  // "{topic} {body}" -> receipts
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
  void configureMap(const std::function<void(sharding::ShardMapSpec&)>& change) {
    std::lock_guard lock(mu_);
    change(map_.spec);
  }

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

  // Gives `shards` of a dead pod `from` to `to` without its acknowledgement, as the operator
  // does once nothing of `from` can run: persist, assign.
  void reassignFromDead(const std::string& from, const std::string& to,
                        const std::vector<sharding::ShardId>& shards) {
    std::lock_guard op(opMu_);
    {
      std::lock_guard lock(mu_);
      for (auto s : shards) {
        EXPECT_EQ(table_.owner(s), indexOf(from)) << "shard " << s << " is not " << from << "'s";
      }
    }
    persistAndAssign({{to, shards}});
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

  // As the operator, which sends a failed step again in its next round: an assign the sidecar
  // answered 503 (its map not loaded yet) is sent again, for up to 10 s.
  void assignAt(const std::string& pod, const std::vector<sharding::ShardId>& shards,
                std::int64_t epoch) {
    auto r = command("/v1/shards/assign", pod, shards, epoch);
    for (int i = 0; i < 100 && r.ok() && r->status == 503; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      r = command("/v1/shards/assign", pod, shards, epoch);
    }
    EXPECT_TRUE(r.ok() && r->status == 200)
        << "assign to " << pod << " failed: "
        << (r.ok() ? std::to_string(r->status) + " " + r->body : r.status().toString());
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
            {req->pod, req->uid, req->address, req->version, 0, req->incarnation, {}});
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
  std::vector<std::string> argv;  // how it was started: a restart uses the same
  int starts = 0;
  std::unique_ptr<Subprocess> process;
  std::unique_ptr<http::Client> api;
  std::unique_ptr<http::Client> peer;
  std::unique_ptr<http::Client> admin;
};

class SidecarComponentTest : public ::testing::Test {
 protected:
  // How the sidecars forward to each other (--peer-transport).
  virtual std::string peerTransport() const { return "channel"; }
  // More flags for every sidecar.
  virtual std::vector<std::string> extraArgs() const { return {}; }
  // Changes to the stub operator's ShardMap before the sidecars start.
  virtual void configureMap(sharding::ShardMapSpec&) {}

  // The running test's name as a file name part (a parameterized test's has a '/').
  static std::string testFileName() {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    return name;
  }
  // Starts (again) the sidecar process of `sc` with its flags; its log goes to a file per start.
  void launch(Sidecar& sc) {
    ++sc.starts;
    sc.process =
        std::make_unique<Subprocess>(sc.argv, std::map<std::string, std::string>{},
                                     ::testing::TempDir() + "/sidecar-" + testFileName() + "-" +
                                         sc.pod + "-" + std::to_string(sc.starts) + ".log");
  }
  // SIGKILLs the sidecar process alone (its app keeps running, as after an OOM kill of the
  // sidecar's container) and starts it again.
  void restart(Sidecar& sc) {
    sc.process->signal(SIGKILL);
    ASSERT_EQ(sc.process->wait(seconds(10)), 128 + SIGKILL);
    launch(sc);
  }

  void SetUp() override {
    operator_.configureMap([this](sharding::ShardMapSpec& spec) { configureMap(spec); });
    for (int i = 1; i <= 3; ++i) {
      const std::string pod = "p" + std::to_string(i);
      apps_.push_back(std::make_unique<StubApp>(pod, world_));
      auto sc = std::make_unique<Sidecar>();
      sc->pod = pod;
      sc->apiPort = freeLoopbackPort();
      sc->adminPort = freeLoopbackPort();
      const auto peerPort = freeLoopbackPort();
      sc->argv = {KSHARD_SIDECAR_BINARY, "--pod-name=" + pod, "--pod-namespace=demo",
                  "--pod-uid=uid-" + pod, "--pod-ip=127.0.0.1", "--shard-map=counter",
                  "--version=1.0.0", "--app-port=" + std::to_string(apps_.back()->port()),
                  "--api-port=" + std::to_string(sc->apiPort),
                  "--peer-port=" + std::to_string(peerPort),
                  "--admin-port=" + std::to_string(sc->adminPort), "--admin-bind-address=127.0.0.1",
                  "--map-source=manager", "--manager-address=" + operator_.address(),
                  "--map-poll-interval=100ms",
                  "--max-concurrent-stops=" + std::to_string(kMaxConcurrentStops),
                  "--peer-transport=" + peerTransport(),
                  // No API server for the issuer keys here: the fixture's stub operator sends
                  // no credentials (tests/sidecar/token_authorizer_test.cc covers them).
                  "--peer-auth=none"};
      for (const auto& arg : extraArgs()) sc->argv.push_back(arg);
      launch(*sc);
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

}  // namespace
}  // namespace kshard::sidecar
