#include "operator/pod_provisioner.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

PodInfo podWith(std::map<std::string, std::string> annotations) {
  PodInfo p;
  p.namespace_ = "demo";
  p.name = "counter-0";
  p.uid = "u";
  p.labels = {{kShardMapLabel, "counter"}};
  p.annotations = std::move(annotations);
  return p;
}

TEST(ShardCountForPod, AnnotationOrDefault) {
  EXPECT_EQ(*shardCountForPod(podWith({}), 300), 300);
  EXPECT_EQ(*shardCountForPod(podWith({{kShardsAnnotation, "1024"}}), 300), 1024);
  EXPECT_EQ(*shardCountForPod(podWith({{kShardsAnnotation, "100000"}}), 300), 100000);
}

TEST(ShardCountForPod, InvalidAnnotationIsAnErrorNotTheDefault) {
  for (const char* bad : {"0", "100001", "-5", "12x", "", " 12", "1e3"}) {
    auto n = shardCountForPod(podWith({{kShardsAnnotation, bad}}), 300);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_NE(n.status().message().find(kShardsAnnotation), std::string::npos);
  }
}

// Issue 29: any pod labelled kshard.io/shard-map=<anything> made the operator create that
// ShardMap, without bound.
TEST(MayCreateShardMap, OnlyForInjectedPodsAndBelowTheCapOfTheNamespace) {
  const PodInfo injected = podWith({{kInjectedAnnotation, "native-sidecar"}});
  EXPECT_TRUE(mayCreateShardMap(injected, 0, 20).ok());
  EXPECT_TRUE(mayCreateShardMap(injected, 19, 20).ok());
  const Status full = mayCreateShardMap(injected, 20, 20);
  EXPECT_EQ(full.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(full.message().find("--max-shard-maps-per-namespace"), std::string::npos)
      << full.message();
  const Status labelled = mayCreateShardMap(podWith({}), 0, 20);
  EXPECT_EQ(labelled.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(labelled.message().find("kshard.io/injected"), std::string::npos) << labelled.message();
}

TEST(NewShardMapObject, IsAShardMapWithTheShardCount) {
  auto obj = newShardMapObject("demo", "counter", 600);
  EXPECT_EQ(obj["apiVersion"], "kshard.io/v1alpha1");
  EXPECT_EQ(obj["kind"], "ShardMap");
  EXPECT_EQ(obj["metadata"]["namespace"], "demo");
  EXPECT_EQ(obj["metadata"]["name"], "counter");
  EXPECT_EQ(obj["spec"]["shards"], 600);
}

TEST(SidecarRoleBinding, BindsTheClusterRoleToEachServiceAccount) {
  auto rb = sidecarRoleBindingObject("demo", "kshard-sidecar", "kshard-sidecar", {"a", "b"});
  EXPECT_EQ(rb["kind"], "RoleBinding");
  EXPECT_EQ(rb["roleRef"]["kind"], "ClusterRole");
  EXPECT_EQ(rb["roleRef"]["name"], "kshard-sidecar");
  ASSERT_EQ(rb["subjects"].size(), 2u);
  EXPECT_EQ(rb["subjects"][0]["kind"], "ServiceAccount");
  EXPECT_EQ(rb["subjects"][0]["name"], "a");
  EXPECT_EQ(rb["subjects"][0]["namespace"], "demo");
}

TEST(SidecarRoleBinding, MatchIgnoresOrderAndServerFields) {
  auto desired = sidecarRoleBindingObject("demo", "kshard-sidecar", "kshard-sidecar", {"a", "b"});
  auto existing = desired;
  existing["metadata"]["resourceVersion"] = "42";
  std::swap(existing["subjects"][0], existing["subjects"][1]);
  EXPECT_TRUE(roleBindingMatches(existing, desired));
  auto fewer = sidecarRoleBindingObject("demo", "kshard-sidecar", "kshard-sidecar", {"a"});
  EXPECT_FALSE(roleBindingMatches(fewer, desired));
  auto otherRole = sidecarRoleBindingObject("demo", "kshard-sidecar", "admin", {"a", "b"});
  EXPECT_FALSE(roleBindingMatches(otherRole, desired));
}

}  // namespace
}  // namespace kshard::manager
