#include "kube/api_request.h"

#include <gtest/gtest.h>

namespace kshard::kube {
namespace {

using nlohmann::json;

const ResourceRef kShardMaps{"kshard.io", "v1alpha1", "shardmaps", Scope::kNamespaced};

TEST(ResourceRefTest, CoreGroupUsesApiAndOthersUseApis) {
  EXPECT_EQ(resources::kPods.objectPath("demo", "counter-0"),
            "/api/v1/namespaces/demo/pods/counter-0");
  EXPECT_EQ(kShardMaps.objectPath("demo", "counter", "status"),
            "/apis/kshard.io/v1alpha1/namespaces/demo/shardmaps/counter/status");
  EXPECT_EQ(resources::kTokenReviews.collectionPath(""),
            "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_EQ(resources::kPods.collectionPath(""), "/api/v1/pods");
  EXPECT_EQ(kShardMaps.apiVersion(), "kshard.io/v1alpha1");
  EXPECT_EQ(resources::kPods.apiVersion(), "v1");
  EXPECT_EQ(resources::kLeases.displayName(), "leases.coordination.k8s.io");
}

TEST(ApiRequestTest, ListEncodesSelectorsAndPaging) {
  ListOptions o;
  o.labelSelector = "kshard.io/shard-map=counter,tier in (a,b)";
  o.fieldSelector = "metadata.name=counter";
  o.limit = 500;
  o.continueToken = "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==";
  ApiRequest r = listRequest(resources::kPods, "demo", o);
  ASSERT_TRUE(r.invalid.ok());
  EXPECT_EQ(r.method, http::Method::kGet);
  EXPECT_EQ(
      r.target(),
      "/api/v1/namespaces/demo/pods?labelSelector=kshard.io%2Fshard-map%3Dcounter%2Ctier%20in%"
      "20%28a%2Cb%29&fieldSelector=metadata.name%3Dcounter&limit=500&continue="
      "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ%3D%3D");
  EXPECT_TRUE(r.idempotent());
}

TEST(ApiRequestTest, WatchAsksForBookmarksAndATimeout) {
  WatchOptions o;
  o.resourceVersion = "1234";
  o.timeout = std::chrono::seconds(317);
  ApiRequest r = watchRequest(kShardMaps, "demo", o);
  EXPECT_EQ(r.target(),
            "/apis/kshard.io/v1alpha1/namespaces/demo/shardmaps?watch=true&resourceVersion=1234&"
            "allowWatchBookmarks=true&timeoutSeconds=317");
}

TEST(ApiRequestTest, MetadataOnlyReadsAskForPartialObjectMetadata) {
  ListOptions l;
  EXPECT_EQ(listRequest(kShardMaps, "demo", l).accept, "application/json");
  l.metadataOnly = true;
  EXPECT_EQ(listRequest(kShardMaps, "demo", l).accept,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
  WatchOptions w;
  w.metadataOnly = true;
  EXPECT_EQ(watchRequest(kShardMaps, "demo", w).accept,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
}

TEST(ApiRequestTest, UpdateTakesTheNameFromTheObjectAndWritesTheSubresource) {
  json sm = {{"metadata", {{"name", "counter"}, {"resourceVersion", "7"}}}, {"status", {}}};
  WriteOptions o;
  o.subresource = "status";
  ApiRequest r = updateRequest(kShardMaps, "demo", sm, o);
  ASSERT_TRUE(r.invalid.ok());
  EXPECT_EQ(r.method, http::Method::kPut);
  EXPECT_EQ(r.path, "/apis/kshard.io/v1alpha1/namespaces/demo/shardmaps/counter/status");
  EXPECT_EQ((*r.body)["metadata"]["resourceVersion"], "7");
  EXPECT_FALSE(r.idempotent());
}

TEST(ApiRequestTest, BadArgumentsAreReportedNotSent) {
  EXPECT_EQ(updateRequest(kShardMaps, "demo", json{{"spec", {}}}).invalid.code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(getRequest(resources::kPods, "", "a").invalid.message().find("namespace is required"),
            std::string::npos);
  EXPECT_NE(createRequest(resources::kTokenReviews, "demo", json{{"metadata", {{"name", "x"}}}})
                .invalid.message()
                .find("cluster-scoped"),
            std::string::npos);
  EXPECT_FALSE(getRequest(resources::kPods, "demo", "a/b").invalid.ok());
  EXPECT_FALSE(
      patchRequest(resources::kPods, "demo", "a", PatchType::kJson, json::object()).invalid.ok());
  EXPECT_FALSE(
      patchRequest(resources::kPods, "demo", "a", PatchType::kApply, json::object()).invalid.ok());
  EXPECT_FALSE(createRequest(resources::kPods, "demo",
                             json{{"metadata", {{"name", "a"}, {"namespace", "other"}}}})
                   .invalid.ok());
}

TEST(ApiRequestTest, CreateOfTokenReviewIsAPlainClusterScopedCreate) {
  json review = {{"apiVersion", "authentication.k8s.io/v1"},
                 {"kind", "TokenReview"},
                 {"metadata", {{"generateName", "kshard-"}}},
                 {"spec", {{"token", "abc"}}}};
  ApiRequest r = createRequest(resources::kTokenReviews, "", review);
  ASSERT_TRUE(r.invalid.ok()) << r.invalid.toString();
  EXPECT_EQ(r.path, "/apis/authentication.k8s.io/v1/tokenreviews");
}

TEST(ApiRequestTest, SubresourceCreatesPostToTheNamedObject) {
  ApiRequest binding = createSubresourceRequest(resources::kPods, "demo", "counter-0", "binding",
                                                json{{"target", {{"name", "node-1"}}}});
  EXPECT_EQ(binding.path, "/api/v1/namespaces/demo/pods/counter-0/binding");
  ApiRequest token = createSubresourceRequest(resources::kServiceAccounts, "demo", "sidecar",
                                              "token", json{{"spec", {{"audiences", {"kshard"}}}}});
  EXPECT_EQ(token.path, "/api/v1/namespaces/demo/serviceaccounts/sidecar/token");
  EXPECT_EQ(token.method, http::Method::kPost);
}

TEST(ApiRequestTest, PatchTypesSetTheirContentType) {
  EXPECT_EQ(patchRequest(resources::kPods, "d", "a", PatchType::kMerge, json::object()).contentType,
            "application/merge-patch+json");
  EXPECT_EQ(patchRequest(resources::kPods, "d", "a", PatchType::kJson, json::array()).contentType,
            "application/json-patch+json");
  EXPECT_EQ(patchRequest(resources::kPods, "d", "a", PatchType::kStrategicMerge, json::object())
                .contentType,
            "application/strategic-merge-patch+json");
  WriteOptions apply;
  apply.fieldManager = "kshard-operator";
  ApiRequest r = patchRequest(resources::kPods, "d", "a", PatchType::kApply, json::object(), apply);
  EXPECT_EQ(r.contentType, "application/apply-patch+yaml");
  EXPECT_EQ(r.target(), "/api/v1/namespaces/d/pods/a?fieldManager=kshard-operator");
}

TEST(ApiRequestTest, DeleteCarriesPreconditionsGraceAndPropagation) {
  DeleteOptions o;
  o.gracePeriodSeconds = 0;
  o.preconditionUid = "u-1";
  o.preconditionResourceVersion = "42";
  o.propagationPolicy = PropagationPolicy::kForeground;
  ApiRequest r = deleteRequest(resources::kPods, "demo", "a", o);
  EXPECT_EQ(r.method, http::Method::kDelete);
  EXPECT_EQ(*r.body, (json{{"kind", "DeleteOptions"},
                           {"apiVersion", "v1"},
                           {"gracePeriodSeconds", 0},
                           {"preconditions", {{"uid", "u-1"}, {"resourceVersion", "42"}}},
                           {"propagationPolicy", "Foreground"}}));
  // A delete with preconditions is still not retried on transport errors (see client.h).
  EXPECT_FALSE(r.idempotent());
}

}  // namespace
}  // namespace kshard::kube
