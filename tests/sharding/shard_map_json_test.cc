#include "sharding/shard_map_json.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace kshard::sharding {
namespace {

using nlohmann::json;

// The resource as DESIGN.md shows it, in JSON.
constexpr char kDesignExample[] = R"({
  "apiVersion": "kshard.io/v1alpha1",
  "kind": "ShardMap",
  "metadata": {"name": "counter", "namespace": "demo", "generation": 3, "uid": "u-1",
               "resourceVersion": "981", "creationTimestamp": "2026-01-02T03:04:05Z",
               "labels": {"ignored": "yes"}},
  "spec": {
    "shards": 300,
    "versionLabel": "app.kubernetes.io/version",
    "rebalanceInterval": "20s",
    "rebalanceRetryInterval": "10s",
    "rebalanceRate": 0.02,
    "pingTimeout": "3s",
    "handoffTimeout": "30s",
    "entityIdleTimeout": "60s",
    "sendTimeout": "10s"
  },
  "status": {
    "observedGeneration": 3,
    "epoch": 57,
    "manager": {"pod": "kshard-operator-7c9-x2", "address": "10.1.0.7:7200"},
    "pods": [
      {"name": "counter-5d9-abc", "uid": "u-abc", "address": "10.1.0.12:7101", "version": "2.0.0", "shards": 150},
      {"name": "counter-5d9-def", "uid": "u-def", "address": "10.1.0.13:7101", "version": "2.0.0", "shards": 150}
    ],
    "assignments": [
      {"pod": "counter-5d9-abc", "epoch": 55, "shards": "1-120,151-180"},
      {"pod": "counter-5d9-def", "epoch": 57, "shards": "121-150,181-300"}
    ],
    "unassigned": "",
    "podCount": 2,
    "unassignedCount": 0,
    "conditions": [
      {"type": "Ready", "status": "True", "observedGeneration": 3,
       "lastTransitionTime": "2026-01-02T03:05:00Z", "reason": "PodsRegistered", "message": "2 pods"}
    ]
  }
})";

ShardMap decoded(std::string_view text) {
  StatusOr<ShardMap> m = parseShardMap(text);
  EXPECT_TRUE(m.ok()) << m.status().toString();
  return m.valueOr(ShardMap());
}

std::string errorOf(const json& j) {
  StatusOr<ShardMap> m = shardMapFromJson(j);
  EXPECT_FALSE(m.ok()) << j.dump();
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  return m.status().message();
}

json minimal() { return json{{"spec", {{"shards", 10}}}}; }

TEST(ShardMapJsonTest, DecodesTheDesignExample) {
  const ShardMap m = decoded(kDesignExample);
  EXPECT_EQ(m.metadata.name, "counter");
  EXPECT_EQ(m.metadata.namespace_, "demo");
  EXPECT_EQ(m.metadata.generation, 3);
  EXPECT_EQ(m.metadata.resourceVersion, "981");
  EXPECT_EQ(m.spec.shards, 300);
  EXPECT_EQ(m.spec.rebalanceInterval, std::chrono::seconds(20));
  EXPECT_DOUBLE_EQ(m.spec.rebalanceRate, 0.02);
  EXPECT_EQ(m.status.epoch, 57);
  ASSERT_TRUE(m.status.manager.has_value());
  EXPECT_EQ(m.status.manager->address, "10.1.0.7:7200");
  ASSERT_EQ(m.status.pods.size(), 2u);
  EXPECT_EQ(m.status.pods[0].version, "2.0.0");
  EXPECT_EQ(m.status.pods[1].shards, 150);
  ASSERT_EQ(m.status.assignments.size(), 2u);
  EXPECT_EQ(m.status.assignments[0].epoch, 55);
  EXPECT_EQ(m.status.assignments[0].shards.size(), 150);
  EXPECT_TRUE(m.status.unassigned.empty());
  ASSERT_EQ(m.status.conditions.size(), 1u);
  EXPECT_EQ(m.status.conditions[0].reason, "PodsRegistered");
  EXPECT_EQ(m.status.conditions[0].observedGeneration, 3);
}

TEST(ShardMapJsonTest, EncodesWithTheDesignFieldNames) {
  const json j = toJson(decoded(kDesignExample));
  EXPECT_EQ(j["apiVersion"], "kshard.io/v1alpha1");
  EXPECT_EQ(j["kind"], "ShardMap");
  EXPECT_EQ(j["spec"]["rebalanceInterval"], "20s");
  EXPECT_EQ(j["spec"]["entityIdleTimeout"], "1m0s");  // Go's spelling of 60s
  EXPECT_EQ(j["status"]["assignments"][0]["shards"], "1-120,151-180");
  EXPECT_EQ(j["status"]["manager"]["pod"], "kshard-operator-7c9-x2");
  EXPECT_EQ(j["status"]["unassignedCount"], 0);
  EXPECT_EQ(j["status"]["conditions"][0]["lastTransitionTime"], "2026-01-02T03:05:00Z");
  EXPECT_FALSE(j["metadata"].contains("labels"));
  const json spec = j["spec"];
  for (const char* key :
       {"shards", "versionLabel", "rebalanceInterval", "rebalanceRetryInterval", "rebalanceRate",
        "pingTimeout", "handoffTimeout", "entityIdleTimeout", "sendTimeout", "ownershipLease",
        "balance", "loadTolerance", "handoffFailureLimit", "handoffBackoff",
        "maxActiveEntitiesPerPod"}) {
    EXPECT_TRUE(spec.contains(key)) << key;
  }
  EXPECT_EQ(spec.size(), 15u);
  EXPECT_EQ(spec["handoffFailureLimit"], 3);
  EXPECT_EQ(spec["handoffBackoff"], "30s");
  EXPECT_EQ(spec["maxActiveEntitiesPerPod"], 0) << "no limit by default";
  EXPECT_EQ(spec["ownershipLease"], "30s");
  EXPECT_EQ(spec["balance"], "count");
  EXPECT_EQ(spec["loadTolerance"], 0.1);
  EXPECT_FALSE(j["status"].contains("load"));  // not measured yet
  EXPECT_FALSE(j["status"]["pods"][0].contains("load"));
}

TEST(ShardMapJsonTest, RoundTripsTheBalanceAndTheMeasuredLoad) {
  ShardMap m = decoded(kDesignExample);
  m.spec.balance = Balance::kLoad;
  m.spec.loadTolerance = 0.25;
  m.status.pods[0].load = 0.75;
  m.status.load = LoadStatus{1.5, 1.2, 2.5, {{7, "a", 0.5}, {3, "b", 0.25}}};
  const json j = toJson(m);
  EXPECT_EQ(j["spec"]["balance"], "load");
  EXPECT_EQ(j["status"]["pods"][0]["load"], 0.75);
  EXPECT_EQ(j["status"]["load"]["hottest"][0]["shard"], 7);
  StatusOr<ShardMap> back = shardMapFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, m);
}

TEST(ShardMapJsonTest, BadBalanceAndLoadFieldsNameTheField) {
  json j = minimal();
  j["spec"]["balance"] = "weight";
  EXPECT_EQ(errorOf(j), "spec.balance: must be \"count\" or \"load\"");
  j = minimal();
  j["spec"]["loadTolerance"] = 0;
  EXPECT_EQ(errorOf(j), "spec.loadTolerance: must be > 0 and <= 10");
  j["spec"]["loadTolerance"] = 11;
  EXPECT_EQ(errorOf(j), "spec.loadTolerance: must be > 0 and <= 10");
  j = json::parse(kDesignExample);
  j["status"]["pods"][1]["load"] = -1;
  EXPECT_EQ(errorOf(j), "status.pods[1].load: must be a finite number >= 0");
  j = json::parse(kDesignExample);
  j["status"]["load"] = {{"peakToMean", 1.2}, {"hottest", {{{"shard", 301}}}}};
  EXPECT_EQ(errorOf(j), "status.load.hottest[0].shard: must be in 1..300");
}

TEST(ShardMapJsonTest, RoundTripsTheHandoffThrottle) {
  ShardMap m = decoded(kDesignExample);
  m.spec.handoffFailureLimit = 0;
  m.spec.handoffBackoff = std::chrono::minutes(2);
  const json j = toJson(m);
  EXPECT_EQ(j["spec"]["handoffFailureLimit"], 0);
  EXPECT_EQ(j["spec"]["handoffBackoff"], "2m0s");
  StatusOr<ShardMap> back = shardMapFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, m);
}

TEST(ShardMapJsonTest, RoundTripsTheRememberedEntityTypes) {
  ShardMap m = decoded(kDesignExample);
  EXPECT_FALSE(toJson(m)["spec"].contains("rememberedEntityTypes"));  // none: not written
  m.spec.rememberedEntityTypes = {"counter", "consumer"};
  const json j = toJson(m);
  EXPECT_EQ(j["spec"]["rememberedEntityTypes"], json::array({"counter", "consumer"}));
  StatusOr<ShardMap> back = shardMapFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, m);
}

TEST(ShardMapJsonTest, BadHandoffThrottleFieldsNameTheField) {
  json j = minimal();
  j["spec"]["handoffFailureLimit"] = -1;
  EXPECT_NE(errorOf(j).find("spec.handoffFailureLimit"), std::string::npos) << errorOf(j);
  j["spec"]["handoffFailureLimit"] = 1001;
  EXPECT_NE(errorOf(j).find("spec.handoffFailureLimit"), std::string::npos) << errorOf(j);
  j = minimal();
  j["spec"]["handoffBackoff"] = "0s";
  EXPECT_EQ(errorOf(j), "spec.handoffBackoff: must be > 0");
}

TEST(ShardMapJsonTest, BadRememberedEntityTypesNameTheField) {
  json j = minimal();
  j["spec"]["rememberedEntityTypes"] = "counter";
  EXPECT_NE(errorOf(j).find("spec.rememberedEntityTypes"), std::string::npos) << errorOf(j);
  j["spec"]["rememberedEntityTypes"] = {"counter", 7};
  EXPECT_EQ(errorOf(j), "spec.rememberedEntityTypes: item 1 is not a string");
  j["spec"]["rememberedEntityTypes"] = {"counter", ""};
  EXPECT_EQ(errorOf(j), "spec.rememberedEntityTypes[1]: must not be empty");
  j["spec"]["rememberedEntityTypes"] = {"counter", "counter"};
  EXPECT_EQ(errorOf(j), "spec.rememberedEntityTypes[1]: \"counter\" is listed twice");
  j["spec"]["rememberedEntityTypes"] = {std::string(254, 'x')};
  EXPECT_EQ(errorOf(j), "spec.rememberedEntityTypes[0]: longer than 253 bytes");
  json many = json::array();
  for (int i = 0; i < 33; ++i) many.push_back("t" + std::to_string(i));
  j["spec"]["rememberedEntityTypes"] = many;
  EXPECT_EQ(errorOf(j), "spec.rememberedEntityTypes: at most 32 types");
}

TEST(ShardMapJsonTest, RoundTripsSingletonsAndChecksTheirNames) {
  ShardMap m = decoded(kDesignExample);
  EXPECT_TRUE(m.spec.singletons.empty());
  EXPECT_FALSE(toJson(m)["spec"].contains("singletons"));
  m.spec.singletons = {"ticker", "leader-election"};
  const json j = toJson(m);
  EXPECT_EQ(j["spec"]["singletons"], json({"ticker", "leader-election"}));
  StatusOr<ShardMap> back = shardMapFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, m);

  json bad = minimal();
  bad["spec"]["singletons"] = {"a", ""};
  EXPECT_EQ(errorOf(bad), "spec.singletons[1]: must not be empty");
  bad["spec"]["singletons"] = {"a", "b", "a"};
  EXPECT_EQ(errorOf(bad), "spec.singletons[2]: \"a\" is listed twice");
  bad["spec"]["singletons"] = {"a", 3};
  EXPECT_EQ(errorOf(bad), "spec.singletons: item 1 is not a string");
  bad["spec"]["singletons"] = json::array();
  for (int i = 0; i <= 100; ++i) bad["spec"]["singletons"].push_back("s" + std::to_string(i));
  EXPECT_EQ(errorOf(bad), "spec.singletons: at most 100 names");
}

TEST(ShardMapJsonTest, RoundTripsTheActiveEntityLimitAndNamesABadOne) {
  ShardMap m = decoded(kDesignExample);
  m.spec.maxActiveEntitiesPerPod = 20;
  const json j = toJson(m);
  EXPECT_EQ(j["spec"]["maxActiveEntitiesPerPod"], 20);
  StatusOr<ShardMap> back = shardMapFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->spec.maxActiveEntitiesPerPod, 20);
  json bad = minimal();
  bad["spec"]["maxActiveEntitiesPerPod"] = -1;
  EXPECT_EQ(errorOf(bad), "spec.maxActiveEntitiesPerPod: must be in 0..2147483647");
  bad["spec"]["maxActiveEntitiesPerPod"] = 1.5;
  EXPECT_EQ(errorOf(bad), "spec.maxActiveEntitiesPerPod: must be an integer");
}

TEST(ShardMapJsonTest, RoundTripsTheWholeResource) {
  const ShardMap m = decoded(kDesignExample);
  StatusOr<ShardMap> back = shardMapFromJson(toJson(m));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, m);
  EXPECT_EQ(toJson(*back), toJson(m));
}

TEST(ShardMapJsonTest, MissingSpecFieldsTakeDefaults) {
  StatusOr<ShardMap> m = shardMapFromJson(minimal());
  ASSERT_TRUE(m.ok()) << m.status().toString();
  ShardMapSpec expected;
  expected.shards = 10;
  EXPECT_EQ(m->spec, expected);
  EXPECT_EQ(m->status, ShardMapStatus());
}

TEST(ShardMapJsonTest, ParsesKubernetesDurations) {
  json j = minimal();
  j["spec"]["rebalanceInterval"] = "1m30s";
  j["spec"]["pingTimeout"] = "500ms";
  j["spec"]["entityIdleTimeout"] = "0s";
  StatusOr<ShardMap> m = shardMapFromJson(j);
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_EQ(m->spec.rebalanceInterval, std::chrono::seconds(90));
  EXPECT_EQ(m->spec.pingTimeout, std::chrono::milliseconds(500));
  EXPECT_EQ(m->spec.entityIdleTimeout, Duration::zero());
  EXPECT_EQ(toJson(m->spec)["rebalanceInterval"], "1m30s");
  EXPECT_EQ(toJson(m->spec)["pingTimeout"], "500ms");
}

TEST(ShardMapJsonTest, SpecErrorsNameTheField) {
  json j = minimal();
  j["spec"]["rebalanceRate"] = 0;
  EXPECT_EQ(errorOf(j), "spec.rebalanceRate: must be > 0 and <= 1");
  j["spec"]["rebalanceRate"] = "0.5";
  EXPECT_EQ(errorOf(j), "spec.rebalanceRate: must be a number");
  j = minimal();
  j["spec"].erase("shards");
  EXPECT_EQ(errorOf(j), "spec.shards: is required");
  j["spec"]["shards"] = 100001;
  EXPECT_EQ(errorOf(j), "spec.shards: must be in 1..100000");
  j["spec"]["shards"] = 10.5;
  EXPECT_EQ(errorOf(j), "spec.shards: must be an integer");
  j = minimal();
  j["spec"]["pingTimeout"] = "3";
  EXPECT_EQ(errorOf(j),
            "spec.pingTimeout: invalid duration \"3\": missing unit (write it like \"20s\", "
            "\"1m30s\" or \"500ms\")");
  j["spec"]["pingTimeout"] = 3;
  EXPECT_EQ(errorOf(j), "spec.pingTimeout: must be a string");
  j["spec"]["pingTimeout"] = "-3s";
  EXPECT_EQ(errorOf(j), "spec.pingTimeout: must be > 0");
  EXPECT_EQ(errorOf(json{{"spec", 5}}), "spec: must be a JSON object");
  EXPECT_EQ(errorOf(json::object()), "spec: is required");
}

TEST(ShardMapJsonTest, StatusErrorsNameTheFieldPath) {
  json j = json::parse(kDesignExample);
  j["status"]["assignments"][1]["shards"] = "121-150,181-301";
  EXPECT_EQ(errorOf(j), "status.assignments[1].shards: part \"181-301\" is outside 1..300");
  j = json::parse(kDesignExample);
  j["status"]["assignments"][0].erase("epoch");
  EXPECT_EQ(errorOf(j), "status.assignments[0].epoch: is required");
  j = json::parse(kDesignExample);
  j["status"]["pods"][1]["name"] = 7;
  EXPECT_EQ(errorOf(j), "status.pods[1].name: must be a string");
  j = json::parse(kDesignExample);
  j["status"]["conditions"][0]["status"] = "Maybe";
  EXPECT_EQ(errorOf(j), "status.conditions[0].status: must be \"True\", \"False\" or \"Unknown\"");
  j = json::parse(kDesignExample);
  j["status"]["unassigned"] = "x";
  EXPECT_EQ(errorOf(j), "status.unassigned: part \"x\" is not a shard or a range like \"1-10\"");
  j = json::parse(kDesignExample);
  j["status"]["epoch"] = -1;
  EXPECT_EQ(errorOf(j), "status.epoch: must be in 0..9223372036854775807");
  j = json::parse(kDesignExample);
  j["status"]["manager"] = {{"address", "x"}};
  EXPECT_EQ(errorOf(j), "status.manager.pod: is required");
  j = json::parse(kDesignExample);
  j["status"]["pods"] = json::object();
  EXPECT_EQ(errorOf(j), "status.pods: must be an array");
}

TEST(ShardMapJsonTest, RejectsOtherKinds) {
  json j = minimal();
  j["kind"] = "Deployment";
  EXPECT_EQ(errorOf(j), "kind: must be \"ShardMap\"");
  j = minimal();
  j["apiVersion"] = "kshard.io/v2";
  EXPECT_EQ(errorOf(j), "apiVersion: must be \"kshard.io/v1alpha1\"");
}

TEST(ShardMapJsonTest, IgnoresUnknownFieldsAndNulls) {
  json j = minimal();
  j["spec"]["futureField"] = {1, 2};
  j["spec"]["pingTimeout"] = nullptr;
  j["status"] = {{"somethingNew", true}};
  StatusOr<ShardMap> m = shardMapFromJson(j);
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_EQ(m->spec.pingTimeout, std::chrono::seconds(3));
}

TEST(ShardMapJsonTest, InvalidJsonIsAnErrorWithItsPosition) {
  StatusOr<ShardMap> m = parseShardMap("{\"spec\": ");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message().rfind("invalid JSON: ", 0), 0u) << m.status().message();
  EXPECT_NE(m.status().message().find("column 10"), std::string::npos) << m.status().message();
}

// Found by fuzz/shard_map_json_fuzz.cc: the JSON library reports a number beyond a double's range
// with an out_of_range exception, not a parse_error, and it escaped parseJson.
TEST(ShardMapJsonTest, NumberTooLargeForADoubleIsInvalidJsonNotAnException) {
  for (const char* text : {"4444E44444444", R"({"spec": {"shards": 1E400}})",
                           R"({"spec": {"shards": 3, "rebalanceRate": -1e999}})"}) {
    StatusOr<ShardMap> m = parseShardMap(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(m.status().message().rfind("invalid JSON: number overflow", 0), 0u)
        << m.status().message();
  }
}

}  // namespace
}  // namespace kshard::sharding
