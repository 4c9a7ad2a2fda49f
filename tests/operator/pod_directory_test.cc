#include "operator/pod_directory.h"

#include <gtest/gtest.h>

#include "kube/api_time.h"

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
                 "deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 105,
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
  ASSERT_TRUE(p->deletionTimestamp.has_value());
  EXPECT_EQ(kube::formatTime(*p->deletionTimestamp), "2026-01-01T00:00:00Z");
  EXPECT_EQ(p->deletionGracePeriodSeconds, 105);
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
  EXPECT_FALSE(p->deletionTimestamp.has_value());
  EXPECT_FALSE(p->deletionGracePeriodSeconds.has_value());
}

TEST(PodInfoFromJson, AnUnreadableDeletionTimestampStillMeansTerminating) {
  auto p = podInfoFromJson(nlohmann::json::parse(
      R"({"metadata": {"name": "a", "uid": "u", "deletionTimestamp": "yesterday",
                       "deletionGracePeriodSeconds": "30"}})"));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->terminating);
  EXPECT_FALSE(p->deletionTimestamp.has_value());
  EXPECT_FALSE(p->deletionGracePeriodSeconds.has_value());
}

TEST(PodInfoFromJson, MissingNameOrUidIsAnError) {
  EXPECT_FALSE(podInfoFromJson(nlohmann::json::parse(R"({"metadata": {"uid": "u"}})")).ok());
  EXPECT_FALSE(podInfoFromJson(nlohmann::json::parse(R"({"metadata": {"name": "a"}})")).ok());
  EXPECT_FALSE(podInfoFromJson(nlohmann::json::array()).ok());
}

TEST(SlimPodObject, KeepsWhatPodInfoReadsAndDropsTheRest) {
  auto full = nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "counter-0", "namespace": "demo", "uid": "u1", "resourceVersion": "42",
                 "deletionTimestamp": "2026-11-22T10:00:00Z", "deletionGracePeriodSeconds": 30,
                 "labels": {"kshard.io/shard-map": "counter", "app": "counter"},
                 "annotations": {"kshard.io/shards": "300",
                                 "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                 "managedFields": [{"manager": "kubectl"}], "ownerReferences": [{"kind": "ReplicaSet"}]},
    "spec": {"serviceAccountName": "counter", "containers": [{"name": "app", "image": "x"}]},
    "status": {"phase": "Running", "podIP": "10.244.0.7", "conditions": [{"type": "Ready"}]}
  })");
  auto before = podInfoFromJson(full);
  ASSERT_TRUE(before.ok());
  nlohmann::json slim = full;
  slimPodObject(slim);
  auto after = podInfoFromJson(slim);
  ASSERT_TRUE(after.ok());
  PodInfo expected = *before;
  expected.annotations.erase("kubectl.kubernetes.io/last-applied-configuration");
  EXPECT_EQ(*after, expected);
  EXPECT_EQ(after->deletionGracePeriodSeconds, 30);
  EXPECT_EQ(slim.at("metadata").at("resourceVersion"), "42");
  EXPECT_FALSE(slim.at("metadata").contains("managedFields"));
  EXPECT_FALSE(slim.at("metadata").contains("ownerReferences"));
  EXPECT_FALSE(slim.at("spec").contains("containers"));
  EXPECT_FALSE(slim.at("status").contains("conditions"));
  EXPECT_LT(slim.dump().size(), full.dump().size());
}

TEST(SlimPodObject, ToleratesMissingAndOddParts) {
  nlohmann::json bare = {{"metadata", {{"name", "a"}, {"uid", "u"}}}};
  slimPodObject(bare);
  EXPECT_EQ(bare, (nlohmann::json{{"metadata", {{"name", "a"}, {"uid", "u"}}}}));
  nlohmann::json odd = {{"metadata", "text"}, {"spec", 3}, {"status", nullptr}};
  slimPodObject(odd);
  EXPECT_FALSE(podInfoFromJson(odd).ok());
  nlohmann::json notAnObject = "pod";
  slimPodObject(notAnObject);
  EXPECT_EQ(notAnObject, "pod");
}

}  // namespace
}  // namespace kshard::manager
