#include "tools/simulate_run.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <utility>

#include "base/enum_names.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "tools/simulate_instant.h"
#include "tools/simulate_ring.h"

namespace kshard::tools {
namespace {

constexpr std::array<std::pair<Scenario, std::string_view>, 4> kScenarios{{
    {Scenario::kScaleUp, "scale-up"},
    {Scenario::kScaleDown, "scale-down"},
    {Scenario::kRollingUpdate, "rolling-update"},
    {Scenario::kCrash, "crash"},
}};

constexpr std::array<std::pair<Strategy, std::string_view>, 4> kStrategies{{
    {Strategy::kKshard, "kshard"},
    {Strategy::kAkkaClassic, "akka-classic"},
    {Strategy::kAkka, "akka"},
    {Strategy::kRing, "ring"},
}};

constexpr char kOldVersion[] = "1.0.0";
constexpr char kNewVersion[] = "2.0.0";

// Keeps the ledger's serving pods in step with the pods, then tells the manager.
class ServingPods final : public PodListener {
 public:
  ServingPods(OwnershipLedger& ledger, Scheduler& scheduler)
      : ledger_(ledger), sample_(scheduler, [this] { ledger_.sample(); }) {}
  void setManager(SimulatedManager& manager) { manager_ = &manager; }

  void podReady(SimPod pod) override {
    ledger_.setServing(pod, true);
    manager_->podReady(pod);
    // A pod that joins with few shards may widen the imbalance. Sampled once the instant's
    // events (and anything the manager does at once, such as a ring update) are through.
    sample_.request();
  }
  void podTerminating(SimPod pod) override {
    ledger_.setServing(pod, false);
    manager_->podTerminating(pod);
  }
  void podStopped(SimPod pod) override { manager_->podStopped(pod); }
  void podCrashed(SimPod pod) override {
    ledger_.setServing(pod, false);
    manager_->podCrashed(pod);
  }
  void podDied(SimPod pod) override { manager_->podDied(pod); }
  std::optional<SimTime> holdUnregister(SimPod pod) override {
    return manager_->holdUnregister(pod);
  }

 private:
  OwnershipLedger& ledger_;
  EndOfInstant sample_;
  SimulatedManager* manager_ = nullptr;
};

std::unique_ptr<SimulatedManager> makeManager(const SimulationConfig& config, Scheduler& scheduler,
                                              OwnershipLedger& ledger,
                                              const SimulatedDeployment& deployment,
                                              Random& random) {
  switch (config.strategy) {
    case Strategy::kKshard:
      return std::make_unique<KshardManager>(scheduler, ledger, deployment, config.kshard, random);
    case Strategy::kAkkaClassic:
    case Strategy::kAkka: {
      AkkaParams akka = config.akka;
      akka.classic = config.strategy == Strategy::kAkkaClassic;
      return std::make_unique<AkkaManager>(scheduler, ledger, deployment, akka);
    }
    case Strategy::kRing:
      return std::make_unique<RingManager>(scheduler, ledger, deployment, config.virtualNodes);
  }
  return nullptr;
}

// The simulated cluster of one run: its clock, the ledger, the Deployment and the strategy.
struct World {
  explicit World(const SimulationConfig& config)
      : ledger(config.shards),
        serving(ledger, scheduler),
        deployment(scheduler, config.timing, config.rolling, serving),
        strategyRandom(config.seed),
        manager(makeManager(config, scheduler, ledger, deployment, strategyRandom)) {
    serving.setManager(*manager);
  }

  // Starts `pods` ready pods of the old version and has the strategy place every shard on them.
  std::vector<SimPod> start(std::int32_t pods) {
    const std::vector<SimPod> started = deployment.startReady(pods, kOldVersion);
    for (SimPod p : started) ledger.setServing(p, true);
    manager->startWith(started);
    return started;
  }

  ManualScheduler scheduler;
  OwnershipLedger ledger;
  ServingPods serving;
  SimulatedDeployment deployment;
  SeededRandom strategyRandom;
  std::unique_ptr<SimulatedManager> manager;
};

}  // namespace

std::string_view scenarioName(Scenario scenario) { return nameIn(kScenarios, scenario, "?"); }

std::string_view strategyName(Strategy strategy) { return nameIn(kStrategies, strategy, "?"); }

std::optional<Scenario> parseScenario(std::string_view name) { return valueIn(kScenarios, name); }

std::optional<Strategy> parseStrategy(std::string_view name) { return valueIn(kStrategies, name); }

std::int32_t crashedPods(const SimulationConfig& config) {
  return std::max(1, config.crashed.scaled(config.pods, /*roundUp=*/false));
}

Status validateConfig(const SimulationConfig& config) {
  if (config.shards < sharding::kMinShardCount || config.shards > sharding::kMaxShardCount) {
    return invalidArgument("shards must be in 1..100000, not " + std::to_string(config.shards));
  }
  if (config.pods < 1 || config.pods > kMaxSimulatedPods) {
    return invalidArgument("pods must be in 1.." + std::to_string(kMaxSimulatedPods) + ", not " +
                           std::to_string(config.pods));
  }
  if (config.scenario == Scenario::kCrash && crashedPods(config) > config.pods) {
    return invalidArgument("cannot crash " + std::to_string(crashedPods(config)) + " of " +
                           std::to_string(config.pods) + " pods");
  }
  return {};
}

StatusOr<std::vector<std::int32_t>> steadyStateOwners(const SimulationConfig& config) {
  if (Status s = validateConfig(config); !s.ok()) return s;
  World world(config);
  const std::vector<SimPod> pods = world.start(config.pods);
  if (Status s = world.manager->error(); !s.ok()) return internalError(s.message());
  std::vector<std::int32_t> owners(static_cast<std::size_t>(config.shards));
  for (sharding::ShardId shard = 1; shard <= config.shards; ++shard) {
    const auto at = std::find(pods.begin(), pods.end(), world.ledger.owner(shard));
    if (at == pods.end()) return internalError("shard " + std::to_string(shard) + " has no owner");
    owners[static_cast<std::size_t>(shard - 1)] = static_cast<std::int32_t>(at - pods.begin());
  }
  return owners;
}

StatusOr<SimulationResult> simulate(const SimulationConfig& config,
                                    const SimulationProgress& progress) {
  if (Status s = validateConfig(config); !s.ok()) return s;
  const std::int32_t n = config.pods;
  SimulationResult result;
  result.scenario = config.scenario;
  result.strategy = config.strategy;
  result.shards = config.shards;
  result.podsBefore = config.scenario == Scenario::kScaleDown ? 2 * n : n;
  result.podsAfter = config.scenario == Scenario::kScaleUp ? 2 * n : n;
  if (config.scenario == Scenario::kCrash) result.crashed = crashedPods(config);

  World world(config);
  // A stream of its own, so that the crashed pods are the same whatever the strategy consumes.
  SeededRandom crashRandom(config.seed ^ 0x9e3779b97f4a7c15ULL);
  world.start(result.podsBefore);
  SimulatedDeployment& deployment = world.deployment;
  OwnershipLedger& ledger = world.ledger;
  ManualScheduler& scheduler = world.scheduler;
  SimulatedManager* manager = world.manager.get();
  if (Status s = manager->error(); !s.ok()) return internalError(s.message());
  ledger.resetCounters();

  switch (config.scenario) {
    case Scenario::kScaleUp:
    case Scenario::kScaleDown:
      deployment.scaleTo(result.podsAfter);
      break;
    case Scenario::kRollingUpdate:
      deployment.rollingUpdate(kNewVersion);
      break;
    case Scenario::kCrash:
      deployment.crash(result.crashed, crashRandom);
      break;
  }

  const SteadyTime start = scheduler.clock().now();
  for (;;) {
    if (deployment.stable() && manager->settled()) {
      result.settled = true;
      break;
    }
    if (scheduler.clock().now() - start >= config.maxTime) break;
    scheduler.advance(std::chrono::seconds(1));
    if (Status s = manager->error(); !s.ok()) return internalError(s.message());
    if (progress) progress(scheduler.clock().now() - start, ledger.moves());
  }

  result.moves = ledger.moves();
  result.placements = ledger.placements();
  result.maxMovesOfOneShard = ledger.maxMovesOfOneShard();
  result.rounds = ledger.rounds();
  result.settleTime = ledger.lastChange();
  result.worstImbalance = ledger.worstImbalance();
  result.finalImbalance = ledger.imbalance();
  result.unassigned = ledger.unassignedCount();
  return result;
}

}  // namespace kshard::tools
