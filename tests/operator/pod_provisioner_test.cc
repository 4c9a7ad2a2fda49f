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

// The cap was passed by one in the e2e attack suite: a create answered but not yet shown by the
// informer was no longer counted, so a pod seen in between got a ShardMap too.
TEST(ShardMapsCounted, ACreateCountsFromItsStartUntilTheInformerShowsItOrItSettles) {
  const SteadyTime t0{};
  const std::vector<std::string> cached = {"a/one", "a/two", "b/other"};
  EXPECT_EQ(shardMapsCounted("a", cached, {}, t0), 2u);
  PendingCreates pending = {{"a/three", std::nullopt}, {"b/four", std::nullopt}};
  EXPECT_EQ(shardMapsCounted("a", cached, pending, t0), 3u) << "in flight";
  pending["a/three"] = t0;
  EXPECT_EQ(shardMapsCounted("a", cached, pending, t0 + kCreatedSettle / 2), 3u)
      << "answered, not in the cache yet";
  EXPECT_EQ(shardMapsCounted("a", {"a/one", "a/two", "a/three"}, pending, t0), 3u)
      << "answered and in the cache: counted once";
  EXPECT_EQ(shardMapsCounted("a", cached, pending, t0 + kCreatedSettle), 2u)
      << "never seen within kCreatedSettle: deleted in between";
  EXPECT_EQ(shardMapsCounted("ab", cached, pending, t0), 0u) << "a namespace prefix is not a match";
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
