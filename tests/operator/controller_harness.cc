#include "tests/operator/controller_harness.h"

#include <chrono>

namespace kshard::manager::testing {

using namespace std::chrono_literals;

ControllerHarness::ControllerHarness(std::int32_t shards,
                                     std::function<void(sharding::ShardMapSpec&)> tweak) {
  sharding::ShardMap map;
  map.metadata.name = kMapName;
  map.metadata.namespace_ = kNamespace;
  map.spec.shards = shards;
  if (tweak) tweak(map.spec);
  store.put(map);
  auto check = [this] { checkInvariant(); };
  store.afterEvent = check;
  pods.afterEvent = check;
  pods.handoffTimeout = map.spec.handoffTimeout;
  pods.ownershipLease = map.spec.ownershipLease;
  addReplica("kshard-operator-0");
  renewLeases();
}

ControllerHarness::~ControllerHarness() {
  scheduler.cancel(renewTimer_);
  for (auto& r : replicas_) r->controller->shutdown();
  scheduler.runDue();
  replicas_.clear();
}

ControllerHarness::Replica& ControllerHarness::addReplica(std::string name) {
  auto r = std::make_unique<Replica>();
  r->name = name;
  r->leadership.leader = false;
  r->leadership.clock = &scheduler.clock();
  r->deps = std::make_unique<ControllerDeps>(ControllerDeps{
      scheduler, random, store, pods, directory, r->leadership, events, metrics,
      Logger("operator", LogLevel::kDebug,
             [this](std::string_view line) { logs.emplace_back(line); }),
      sharding::ManagerRef{name, "10.0.0." + std::to_string(replicas_.size() + 1) + ":7200"}});
  r->controller = ShardMapController::create(*r->deps, stored());
  replicas_.push_back(std::move(r));
  return *replicas_.back();
}

void ControllerHarness::lead(std::size_t i) {
  Replica& r = replica(i);
  for (auto& other : replicas_) {
    other->leadership.holderName = r.name;
    other->leadership.deposedFlag = other.get() != &r;
  }
  r.leadership.leader = true;
  r.leadership.renewedAt = scheduler.clock().now();
  r.controller->startLeading();
  const bool done = runUntil([&] {
    auto m = stored();
    return m.status.manager && m.status.manager->pod == r.name;
  });
  ASSERT_TRUE(done) << r.name << " did not take over (status.manager not written)";
}

void ControllerHarness::loseLease(std::size_t i) {
  // Its last renewal was just now: it may confirm ownership leases for its grace, unless
  // another replica leads (lead() marks it deposed).
  replica(i).leadership.renewedAt = scheduler.clock().now();
  replica(i).leadership.leader = false;
  replica(i).controller->stopLeading();
}

StubPod& ControllerHarness::startPod(const std::string& name, const std::string& version) {
  const int n = nextIp_++;
  const std::string ip = "10.1.0." + std::to_string(n);
  PodInfo info;
  info.namespace_ = kNamespace;
  info.name = name;
  info.uid = "uid-" + name + "-" + std::to_string(n);
  info.phase = "Running";
  info.podIp = ip;
  info.serviceAccount = "counter";
  info.labels = {{kShardMapLabel, kMapName}, {"app.kubernetes.io/version", version}};
  directory.put(info);
  return pods.add(name, info.uid, ip + ":7101", version);
}

http::Response ControllerHarness::call(std::function<void(Reply)> send, Duration limit) {
  auto answer = std::make_shared<std::optional<http::Response>>();
  send([answer](http::Response r) { *answer = std::move(r); });
  const bool answered = runUntil([&] { return answer->has_value(); }, limit);
  EXPECT_TRUE(answered) << "the controller did not answer the call within the limit";
  return answered ? **answer : http::Response{0, {}, ""};
}

int ControllerHarness::registerPod(const std::string& name, std::size_t i) {
  StubPod* pod = pods.find(name);
  EXPECT_NE(pod, nullptr) << "no stub pod " << name;
  if (pod == nullptr) return 0;
  protocol::RegisterRequest req{pod->name, pod->uid, pod->address, pod->version, pod->incarnation};
  const SteadyTime sentAt = scheduler.clock().now();
  const int status =
      call([&](Reply reply) { controller(i).registerPod(req, std::move(reply)); }).status;
  // A register the manager took confirms the lease, from when it was sent (ManagerClient).
  if (status == 200 && pod->alive) pod->registry->renewLease(sentAt);
  return status;
}

void ControllerHarness::renewLeases() {
  const auto m = stored();
  for (StubPod* pod : pods.all()) {
    if (!pod->alive || pod->renewFault != Fault::kNone || !m.status.manager) continue;
    for (auto& r : replicas_) {
      if (r->name != m.status.manager->pod) continue;
      const SteadyTime sentAt = scheduler.clock().now();
      // Looked up again on the answer: a pod of that name may have been replaced meanwhile.
      r->controller->renew({pod->name, pod->uid, pod->incarnation},
                           [this, name = pod->name, uid = pod->uid, sentAt](http::Response answer) {
                             StubPod* p = pods.find(name);
                             if (answer.status == 200 && p != nullptr && p->uid == uid &&
                                 p->alive) {
                               p->registry->renewLease(sentAt);
                             }
                           });
    }
  }
  renewTimer_ = scheduler.runAfter(m.spec.ownershipLease / 3, [this] { renewLeases(); });
}

int ControllerHarness::unregisterPod(const std::string& name, std::size_t i) {
  StubPod* pod = pods.find(name);
  EXPECT_NE(pod, nullptr) << "no stub pod " << name;
  if (pod == nullptr) return 0;
  protocol::UnregisterRequest req{pod->name, pod->uid};
  return call([&](Reply reply) { controller(i).unregisterPod(req, std::move(reply)); }).status;
}

void ControllerHarness::killPod(const std::string& name) {
  pods.kill(name);
  directory.erase(name);
  for (auto& r : replicas_) r->controller->podChanged(name);
}

void ControllerHarness::run(Duration d) {
  const Duration step = 10ms;
  for (Duration t{0}; t < d; t += step) scheduler.advance(step);
}

bool ControllerHarness::runUntil(const std::function<bool()>& done, Duration limit) {
  const Duration step = 10ms;
  for (Duration t{0}; t < limit; t += step) {
    if (done()) return true;
    scheduler.advance(step);
  }
  return done();
}

sharding::ShardTable ControllerHarness::storedTable() const {
  auto m = stored();
  auto t = sharding::shardTableFromStatus(m.status, m.spec.shards);
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return t.ok() ? *t : sharding::ShardTable(m.spec.shards);
}

std::map<std::string, std::int32_t> ControllerHarness::counts() const {
  std::map<std::string, std::int32_t> out;
  for (const auto& p : stored().status.pods) out[p.name] = p.shards;
  return out;
}

bool ControllerHarness::converged() const {
  auto m = stored();
  if (m.status.pods.empty() || m.status.unassignedCount != 0) return false;
  std::int32_t lo = m.spec.shards, hi = 0;
  for (const auto& p : m.status.pods) {
    lo = std::min(lo, p.shards);
    hi = std::max(hi, p.shards);
  }
  if (hi - lo > 1) return false;
  auto table = sharding::shardTableFromStatus(m.status, m.spec.shards);
  if (!table.ok()) return false;
  for (std::size_t i = 0; i < m.status.pods.size(); ++i) {
    StubPod* pod = const_cast<StubPods&>(pods).find(m.status.pods[i].name);
    if (pod == nullptr) return false;
    std::set<sharding::ShardId> expected;
    table->shardsOf(static_cast<sharding::PodIndex>(i)).forEach([&](sharding::ShardId s) {
      expected.insert(s);
    });
    if (pod->held() != expected) return false;
  }
  return true;
}

void ControllerHarness::checkInvariant() {
  ++checks_;
  auto report = [&](const std::string& message) {
    if (reported_.insert(message).second) ADD_FAILURE() << message;
  };
  auto m = store.get(kMapKey);
  if (!m) return;
  auto table = sharding::shardTableFromStatus(m->status, m->spec.shards);
  if (!table.ok()) {
    report("stored map is inconsistent: " + table.status().toString());
    return;
  }
  std::map<sharding::ShardId, std::string> holder;
  for (StubPod* pod : pods.all()) {
    for (sharding::ShardId s : pod->held()) {
      auto [it, inserted] = holder.emplace(s, pod->name);
      if (!inserted) {
        report("shard " + std::to_string(s) + " is served by two pods: " + it->second + " and " +
               pod->name);
      }
      const sharding::PodIndex owner = table->owner(s);
      const std::string ownerName = owner == sharding::kNoPod
                                        ? std::string("nobody")
                                        : m->status.pods[static_cast<std::size_t>(owner)].name;
      if (ownerName != pod->name) {
        report("pod " + pod->name + " serves shard " + std::to_string(s) +
               " which the stored map gives to " + ownerName);
      }
    }
  }
}

std::string ControllerHarness::conditionStatus(const std::string& type) const {
  auto m = stored();
  const sharding::Condition* c = sharding::findCondition(m.status.conditions, type);
  return c ? c->status : "";
}

double ControllerHarness::rebalances(const std::string& result) const {
  return const_cast<OperatorMetrics&>(metrics)
      .rebalances()
      .with({{"shard_map", kMapKey}, {"result", result}})
      .value();
}

double ControllerHarness::moves() const {
  return const_cast<OperatorMetrics&>(metrics).moves().with({{"shard_map", kMapKey}}).value();
}

}  // namespace kshard::manager::testing
