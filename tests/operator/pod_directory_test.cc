#include "operator/pod_directory.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

PodInfo pod(std::string uid, std::string phase = "Running", bool terminating = false) {
  PodInfo p;
  p.name = "counter-0";
  p.uid = std::move(uid);
  p.phase = std::move(phase);
  p.terminating = terminating;
  return p;
}

TEST(AssessPod, GoneObjectIsDead) { EXPECT_EQ(assessPod(std::nullopt, "u1"), PodHealth::kDead); }

TEST(AssessPod, AnotherUidUnderTheSameNameIsDead) {
  EXPECT_EQ(assessPod(pod("u2"), "u1"), PodHealth::kDead);
}

TEST(AssessPod, FinishedPhasesAreDead) {
  EXPECT_EQ(assessPod(pod("u1", "Failed"), "u1"), PodHealth::kDead);
  EXPECT_EQ(assessPod(pod("u1", "Succeeded"), "u1"), PodHealth::kDead);
}

TEST(AssessPod, DeletionTimestampIsTerminatingNotDead) {
  EXPECT_EQ(assessPod(pod("u1", "Running", true), "u1"), PodHealth::kTerminating);
}

TEST(AssessPod, RunningPendingAndUnknownAreAlive) {
  EXPECT_EQ(assessPod(pod("u1", "Running"), "u1"), PodHealth::kAlive);
  EXPECT_EQ(assessPod(pod("u1", "Pending"), "u1"), PodHealth::kAlive);
  // Unknown: the node stopped reporting. The pod may still run; its shards stay.
  EXPECT_EQ(assessPod(pod("u1", "Unknown"), "u1"), PodHealth::kAlive);
}

TEST(PodInfoFromJson, ReadsWhatTheOperatorNeeds) {
  auto j = nlohmann::json::parse(R"({
    "metadata": {"name": "counter-0", "namespace": "demo", "uid": "u1",
                 "deletionTimestamp": "2026-01-01T00:00:00Z",
                 "labels": {"kshard.io/shard-map": "counter"},
                 "annotations": {"kshard.io/shards": "600"}},
    "spec": {"serviceAccountName": "counter-sa"},
    "status": {"phase": "Running", "podIP": "10.244.0.7"}})");
  auto p = podInfoFromJson(j);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ(p->name, "counter-0");
  EXPECT_EQ(p->namespace_, "demo");
  EXPECT_EQ(p->uid, "u1");
  EXPECT_TRUE(p->terminating);
  EXPECT_EQ(p->labels.at(kShardMapLabel), "counter");
  EXPECT_EQ(p->annotations.at(kShardsAnnotation), "600");
  EXPECT_EQ(p->serviceAccount, "counter-sa");
  EXPECT_EQ(p->phase, "Running");
  EXPECT_EQ(p->podIp, "10.244.0.7");
}

TEST(PodInfoFromJson, ServiceAccountDefaultsToDefault) {
  auto p = podInfoFromJson(nlohmann::json::parse(R"({"metadata": {"name": "a", "uid": "u"}})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->serviceAccount, "default");
  EXPECT_FALSE(p->terminating);
}

TEST(PodInfoFromJson, MissingNameOrUidIsAnError) {
  EXPECT_FALSE(podInfoFromJson(nlohmann::json::parse(R"({"metadata": {"uid": "u"}})")).ok());
  EXPECT_FALSE(podInfoFromJson(nlohmann::json::parse(R"({"metadata": {"name": "a"}})")).ok());
  EXPECT_FALSE(podInfoFromJson(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace kshard::manager
