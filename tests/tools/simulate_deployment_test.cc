#include "tools/simulate_deployment.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/scheduler.h"

namespace kshard::tools {
namespace {

using std::chrono::seconds;

// Records what a shard manager would hear, with the simulated second it happened at.
class RecordingListener final : public PodListener {
 public:
  explicit RecordingListener(const ManualScheduler& scheduler) : scheduler_(scheduler) {}

  void podReady(SimPod pod) override { record("ready", pod); }
  void podTerminating(SimPod pod) override { record("terminating", pod); }
  void podStopped(SimPod pod) override { record("stopped", pod); }
  void podCrashed(SimPod pod) override { record("crashed", pod); }
  void podDied(SimPod pod) override { record("died", pod); }
  std::optional<SimTime> holdUnregister(SimPod pod) override {
    if (scheduler_.clock().now().time_since_epoch() >= holdUntil) return std::nullopt;
    record("held", pod);
    return retryAfter;
  }

  std::vector<std::string> events;
  // Unregisters asked before this time are held, to be asked again after retryAfter.
  SimTime holdUntil{0};
  SimTime retryAfter = seconds(2);

 private:
  void record(const std::string& what, SimPod pod) {
    const auto t = std::chrono::duration_cast<seconds>(scheduler_.clock().now().time_since_epoch());
    events.push_back(std::to_string(t.count()) + "s " + what + " " + std::to_string(pod));
  }
  const ManualScheduler& scheduler_;
};

struct Fixture {
  explicit Fixture(RollingUpdateParams rolling = {}, DeploymentTiming timing = {})
      : listener(scheduler), deployment(scheduler, timing, rolling, listener) {}
  // Runs the simulation until nothing is left to happen (bounded).
  void settle() {
    for (int i = 0; i < 1000 && !deployment.stable(); ++i) scheduler.advance(seconds(1));
    ASSERT_TRUE(deployment.stable()) << "the deployment did not settle";
  }
  std::int32_t count(const std::string& version, PodPhase phase) const {
    std::int32_t n = 0;
    for (const SimPodInfo& p : deployment.pods()) n += p.version == version && p.phase == phase;
    return n;
  }

  ManualScheduler scheduler;
  RecordingListener listener;
  SimulatedDeployment deployment;
};

TEST(SimulateDeploymentTest, MaxSurgeRoundsUpAndMaxUnavailableRoundsDown) {
  EXPECT_EQ((IntOrPercent{25, true}.scaled(3, true)), 1);
  EXPECT_EQ((IntOrPercent{25, true}.scaled(3, false)), 0);
  EXPECT_EQ((IntOrPercent{25, true}.scaled(1000, false)), 250);
  EXPECT_EQ((IntOrPercent{2, false}.scaled(1000, true)), 2);
}

TEST(SimulateDeploymentTest, StartReadyPodsAreReadyWithoutEvents) {
  Fixture f;
  const std::vector<SimPod> pods = f.deployment.startReady(2, "1.0.0");
  EXPECT_EQ(pods, (std::vector<SimPod>{0, 1}));
  EXPECT_TRUE(f.deployment.stable());
  EXPECT_TRUE(f.listener.events.empty());
  EXPECT_NE(f.deployment.pod(0).address, f.deployment.pod(1).address);
}

TEST(SimulateDeploymentTest, ScaleUpPodsRegisterAfterTheStartDelay) {
  Fixture f;
  f.deployment.startReady(1, "1.0.0");
  f.deployment.scaleTo(3);
  f.scheduler.advance(seconds(9));
  EXPECT_TRUE(f.listener.events.empty());
  EXPECT_FALSE(f.deployment.stable());
  f.settle();
  EXPECT_EQ(f.listener.events, (std::vector<std::string>{"10s ready 1", "10s ready 2"}));
  EXPECT_EQ(f.deployment.pod(2).version, "1.0.0");
}

TEST(SimulateDeploymentTest, ScaleDownDeletesTheNewestPodsWhichStopAfterTheDrain) {
  Fixture f;
  f.deployment.startReady(4, "1.0.0");
  f.deployment.scaleTo(2);
  f.settle();
  EXPECT_EQ(f.listener.events, (std::vector<std::string>{"0s terminating 3", "0s terminating 2",
                                                         "5s stopped 3", "5s stopped 2"}));
}

TEST(SimulateDeploymentTest, AHeldUnregisterIsAskedAgainAfterTheRetryUntilItIsLetGo) {
  Fixture f;
  f.listener.holdUntil = seconds(10);
  f.deployment.startReady(2, "1.0.0");
  f.deployment.scaleTo(1);
  f.scheduler.advance(seconds(10));
  EXPECT_FALSE(f.deployment.stable()) << "a held pod is still terminating";
  EXPECT_EQ(f.deployment.pod(1).phase, PodPhase::kTerminating);
  f.settle();
  EXPECT_EQ(f.listener.events,
            (std::vector<std::string>{"0s terminating 1", "5s held 1", "7s held 1", "9s held 1",
                                      "11s stopped 1"}));
}

TEST(SimulateDeploymentTest, StartingVersionsAreThoseOfPodsNotReadyYet) {
  Fixture f;
  f.deployment.startReady(4, "1.0.0");
  EXPECT_TRUE(f.deployment.startingVersions().empty());
  f.deployment.rollingUpdate("2.0.0");
  f.scheduler.runDue();
  EXPECT_EQ(f.deployment.startingVersions(), std::vector<std::string>{"2.0.0"});
  f.settle();
  EXPECT_TRUE(f.deployment.startingVersions().empty());
}

TEST(SimulateDeploymentTest, RollingUpdateOfThreePodsReplacesOneAtATime) {
  // 25% of 3: maxSurge 1, maxUnavailable 0. An old pod goes only once a new one is ready.
  Fixture f;
  f.deployment.startReady(3, "1.0.0");
  f.deployment.rollingUpdate("2.0.0");
  f.settle();
  EXPECT_EQ(f.listener.events,
            (std::vector<std::string>{"10s ready 3", "10s terminating 2", "15s stopped 2",
                                      "20s ready 4", "20s terminating 1", "25s stopped 1",
                                      "30s ready 5", "30s terminating 0", "35s stopped 0"}));
  EXPECT_EQ(f.count("2.0.0", PodPhase::kReady), 3);
  EXPECT_EQ(f.deployment.pod(5).revision, 1);
}

TEST(SimulateDeploymentTest, RollingUpdateWithDefaultsSurgesAndRemovesAQuarterAtOnce) {
  // 12 pods: maxSurge 3, maxUnavailable 3. At once: 6 new pods (12 + 3 - 9 old left), 3 old
  // pods terminating (9 ready stay = 12 - 3).
  Fixture f;
  f.deployment.startReady(12, "1.0.0");
  f.deployment.rollingUpdate("2.0.0");
  f.scheduler.runDue();
  EXPECT_EQ(f.count("2.0.0", PodPhase::kStarting), 6);
  EXPECT_EQ(f.count("1.0.0", PodPhase::kTerminating), 3);
  EXPECT_EQ(f.count("1.0.0", PodPhase::kReady), 9);
  // When the 6 are ready, 6 more old pods go and the last 6 new pods are created.
  f.scheduler.advance(seconds(10));
  EXPECT_EQ(f.count("2.0.0", PodPhase::kReady), 6);
  EXPECT_EQ(f.count("2.0.0", PodPhase::kStarting), 6);
  EXPECT_EQ(f.count("1.0.0", PodPhase::kTerminating), 6);
  EXPECT_EQ(f.count("1.0.0", PodPhase::kReady), 3);
  f.settle();
  EXPECT_EQ(f.count("2.0.0", PodPhase::kReady), 12);
  EXPECT_EQ(f.count("1.0.0", PodPhase::kGone), 12);
}

TEST(SimulateDeploymentTest, RollingUpdateNeverDropsBelowMinAvailable) {
  RollingUpdateParams rolling;
  rolling.maxSurge = {1, false};
  rolling.maxUnavailable = {0, false};
  Fixture f(rolling);
  f.deployment.startReady(5, "1.0.0");
  f.deployment.rollingUpdate("2.0.0");
  for (int i = 0; i < 200 && !f.deployment.stable(); ++i) {
    f.scheduler.advance(seconds(1));
    const std::int32_t ready =
        f.count("1.0.0", PodPhase::kReady) + f.count("2.0.0", PodPhase::kReady);
    ASSERT_GE(ready, 5) << "at second " << i;
    ASSERT_LE(f.count("2.0.0", PodPhase::kStarting) + ready, 6) << "surge above 1";
  }
  EXPECT_EQ(f.count("2.0.0", PodPhase::kReady), 5);
}

TEST(SimulateDeploymentTest, CrashIsNoticedAfterDetectAndThePodIsReplaced) {
  DeploymentTiming timing;
  timing.detect = seconds(3);
  Fixture f({}, timing);
  f.deployment.startReady(3, "1.0.0");
  SeededRandom random(1);
  const std::vector<SimPod> crashed = f.deployment.crash(1, random);
  ASSERT_EQ(crashed.size(), 1u);
  const std::string c = std::to_string(crashed[0]);
  f.settle();
  EXPECT_EQ(f.listener.events,
            (std::vector<std::string>{"0s crashed " + c, "3s died " + c, "13s ready 3"}));
  EXPECT_TRUE(f.deployment.pod(crashed[0]).crashed);
  EXPECT_EQ(f.deployment.pod(crashed[0]).phase, PodPhase::kGone);
}

TEST(SimulateDeploymentTest, TheSeedPicksTheCrashedPods) {
  std::set<std::vector<SimPod>> picks;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    Fixture f;
    f.deployment.startReady(10, "1.0.0");
    SeededRandom random(seed);
    std::vector<SimPod> crashed = f.deployment.crash(3, random);
    EXPECT_EQ(std::set<SimPod>(crashed.begin(), crashed.end()).size(), 3u) << "distinct pods";
    Fixture again;
    again.deployment.startReady(10, "1.0.0");
    SeededRandom same(seed);
    EXPECT_EQ(again.deployment.crash(3, same), crashed) << "same seed, same pods";
    picks.insert(crashed);
  }
  EXPECT_GT(picks.size(), 4u);
}

}  // namespace
}  // namespace kshard::tools
