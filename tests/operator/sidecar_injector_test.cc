#include "operator/sidecar_injector.h"

#include <gtest/gtest.h>

#include "base/base64.h"

namespace kshard::manager {
namespace {

using nlohmann::json;

json annotatedPod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"generateName": "counter-7d9-", "namespace": "demo",
                 "labels": {"app.kubernetes.io/name": "counter", "app.kubernetes.io/version": "1.0.0"},
                 "annotations": {"kshard.io/inject": "true", "kshard.io/app-port": "8080"}},
    "spec": {"containers": [{"name": "app", "image": "kshard/counter:1.0.0",
                             "ports": [{"containerPort": 8080}]}]}
  })");
}

class SidecarInjectorTest : public ::testing::Test {
 protected:
  SidecarInjector injector(InjectionConfig cfg = {},
                           std::optional<sharding::ShardMapSpec> spec = std::nullopt) {
    return SidecarInjector(
        cfg, [spec](const std::string&, const std::string&) { return spec; },
        Logger("test", LogLevel::kError), [] { return std::string("secret-0"); });
  }
  json inject(const SidecarInjector& inj, const json& pod) {
    auto patch = inj.patchFor(pod, "demo");
    EXPECT_TRUE(patch.ok()) << patch.status().toString();
    return pod.patch(*patch);
  }
  static const json* container(const json& list, const std::string& name) {
    for (const auto& c : list) {
      if (c["name"] == name) return &c;
    }
    return nullptr;
  }
  static std::string env(const json& c, const std::string& name) {
    for (const auto& e : c["env"]) {
      if (e["name"] == name) {
        return e.contains("value") ? e["value"].get<std::string>()
                                   : e["valueFrom"]["fieldRef"]["fieldPath"].get<std::string>();
      }
    }
    return "<unset>";
  }
};

TEST_F(SidecarInjectorTest, InjectsANativeSidecarWithTheDownwardApiEnvironment) {
  const json pod = inject(injector(), annotatedPod());
  EXPECT_EQ(pod["metadata"]["labels"]["kshard.io/shard-map"], "counter");
  ASSERT_TRUE(pod["spec"].contains("initContainers"));
  const json& sc = pod["spec"]["initContainers"][0];
  EXPECT_EQ(sc["name"], "kshard-sidecar");
  EXPECT_EQ(sc["restartPolicy"], "Always");
  EXPECT_EQ(sc["image"], "kshard/sidecar:dev");
  EXPECT_EQ(env(sc, "POD_NAME"), "metadata.name");
  EXPECT_EQ(env(sc, "POD_NAMESPACE"), "metadata.namespace");
  EXPECT_EQ(env(sc, "POD_UID"), "metadata.uid");
  EXPECT_EQ(env(sc, "POD_IP"), "status.podIP");
  EXPECT_EQ(env(sc, "KSHARD_SHARD_MAP"), "counter");
  EXPECT_EQ(env(sc, "KSHARD_APP_PORT"), "8080");
  EXPECT_EQ(env(sc, "KSHARD_VERSION"), "metadata.labels['app.kubernetes.io/version']");
  EXPECT_EQ(env(sc, "KSHARD_MAX_CONCURRENT_STOPS"), "64");
  EXPECT_EQ(env(sc, "KSHARD_MAX_PENDING_TELLS"), "10000");
  EXPECT_EQ(env(sc, "KSHARD_MAX_PENDING_TELL_BYTES"), "33554432");
  EXPECT_EQ(sc["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(sc["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(pod["spec"]["containers"].size(), 1u) << "a native sidecar is not a regular container";
}

// Issue 29: one token (audience kshard) went to the operator and to every peer, so a peer could
// replay it to the operator (e.g. to unregister the pod). Each direction now has its own.
TEST_F(SidecarInjectorTest, MountsOnePodBoundTokenPerDirectionOnlyIntoTheSidecar) {
  json withVolume = annotatedPod();
  withVolume["spec"]["volumes"] = json::array({{{"name", "data"}, {"emptyDir", json::object()}}});
  for (const json& in : {annotatedPod(), withVolume}) {
    const json pod = inject(injector(), in);
    const json* volume = nullptr;
    for (const auto& v : pod["spec"]["volumes"]) {
      if (v["name"] == "kshard-token") volume = &v;
    }
    ASSERT_NE(volume, nullptr) << pod["spec"].dump();
    const json& sources = (*volume)["projected"]["sources"];
    ASSERT_EQ(sources.size(), 2u);
    EXPECT_EQ(sources[0]["serviceAccountToken"], (json{{"audience", "kshard.io/operator"},
                                                       {"path", "operator"},
                                                       {"expirationSeconds", 3600}}));
    EXPECT_EQ(sources[1]["serviceAccountToken"], (json{{"audience", "kshard.io/peer/demo/counter"},
                                                       {"path", "peer"},
                                                       {"expirationSeconds", 3600}}));
    EXPECT_EQ(pod["spec"]["volumes"].size(), in["spec"].value("volumes", json::array()).size() + 1);
    const json& sc = pod["spec"]["initContainers"][0];
    EXPECT_EQ(env(sc, "KSHARD_MANAGER_TOKEN_FILE"), "/var/run/secrets/kshard.io/token/operator");
    EXPECT_EQ(env(sc, "KSHARD_PEER_TOKEN_FILE"), "/var/run/secrets/kshard.io/token/peer");
    ASSERT_EQ(sc["volumeMounts"].size(), 1u);
    EXPECT_EQ(sc["volumeMounts"][0]["name"], "kshard-token");
    EXPECT_EQ(sc["volumeMounts"][0]["readOnly"], true);
    EXPECT_FALSE(pod["spec"]["containers"][0].contains("volumeMounts"))
        << "the app container must not get the token";
  }
}

TEST_F(SidecarInjectorTest, TellsTheSidecarWhoTheOperatorIsWhenPeerAuthIsOn) {
  InjectionConfig cfg;
  cfg.operatorIdentity = "system:serviceaccount:kshard-system:kshard";
  const json pod = inject(injector(cfg), annotatedPod());
  const json& sc = pod["spec"]["initContainers"][0];
  EXPECT_EQ(env(sc, "KSHARD_PEER_AUTH"), "token") << "peer authentication is on by default";
  EXPECT_EQ(env(sc, "KSHARD_OPERATOR_IDENTITY"), "system:serviceaccount:kshard-system:kshard");
  cfg.peerAuth = "none";
  EXPECT_EQ(
      env(inject(injector(cfg), annotatedPod())["spec"]["initContainers"][0], "KSHARD_PEER_AUTH"),
      "none");
}

TEST_F(SidecarInjectorTest, APodWhoseNamespaceIsUnknownIsRefused) {
  json pod = annotatedPod();
  pod["metadata"].erase("namespace");
  const auto patch = injector().patchFor(pod, "");
  ASSERT_FALSE(patch.ok());
  EXPECT_NE(patch.status().message().find("namespace"), std::string::npos)
      << patch.status().toString();
  EXPECT_TRUE(injector().patchFor(annotatedPod(), "").ok()) << "the pod's own namespace counts";
}

TEST_F(SidecarInjectorTest, AddsTheDrainPreStopAndAGracePeriodThatCoversTheHandoff) {
  sharding::ShardMapSpec spec;
  spec.handoffTimeout = std::chrono::seconds(60);
  const json pod = inject(injector({}, spec), annotatedPod());
  const json& app = pod["spec"]["containers"][0];
  EXPECT_EQ(app["lifecycle"]["preStop"]["httpGet"]["path"], "/v1/drain");
  EXPECT_EQ(app["lifecycle"]["preStop"]["httpGet"]["port"], 7102);
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 75);
}

TEST_F(SidecarInjectorTest, TheGracePeriodAlsoCoversTheLongestUnregisterHold) {
  sharding::ShardMapSpec spec;
  spec.handoffTimeout = std::chrono::seconds(30);
  InjectionConfig cfg;
  cfg.unregisterHoldSeconds = 60;  // the operator's --max-unregister-hold
  const json pod = inject(injector(cfg, spec), annotatedPod());
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 30 + 15 + 60);
  // Absurd settings saturate rather than overflow.
  cfg.gracePeriodMarginSeconds = INT64_MAX - 10;
  const json huge = inject(injector(cfg, spec), annotatedPod());
  EXPECT_EQ(huge["spec"]["terminationGracePeriodSeconds"], INT64_MAX);
}

TEST_F(SidecarInjectorTest, TheDrainHookCarriesThePodsTokenAndTheSidecarKnowsIt) {
  const json pod = inject(injector(), annotatedPod());
  const json& hook = pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"];
  ASSERT_EQ(hook["httpHeaders"].size(), 1u);
  EXPECT_EQ(hook["httpHeaders"][0]["name"], "Kshard-Drain-Token");
  EXPECT_EQ(hook["httpHeaders"][0]["value"], "secret-0");
  EXPECT_EQ(env(pod["spec"]["initContainers"][0], "KSHARD_DRAIN_TOKEN"), "secret-0");
  EXPECT_EQ(env(pod["spec"]["initContainers"][0], "KSHARD_APP_PRESTOP"), "<unset>");
  // Each pod draws its own.
  int n = 0;
  SidecarInjector counting({}, nullptr, Logger("test", LogLevel::kError),
                           [&n] { return "secret-" + std::to_string(++n); });
  EXPECT_NE(env(inject(counting, annotatedPod())["spec"]["initContainers"][0], "KSHARD_DRAIN_TOKEN"),
            env(inject(counting, annotatedPod())["spec"]["initContainers"][0], "KSHARD_DRAIN_TOKEN"));
}

TEST_F(SidecarInjectorTest, TheSidecarMeetsTheRestrictedPodSecurityLevel) {
  const json pod = inject(injector(), annotatedPod());
  const json& sc = pod["spec"]["initContainers"][0]["securityContext"];
  EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(sc["runAsNonRoot"], true);
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"}));
}

// An app with a preStop hook of its own still gets the drain before its SIGTERM: the injector
// moves an httpGet or sleep hook to the sidecar, which runs it after the drain.
TEST_F(SidecarInjectorTest, TheAppsOwnHttpGetOrSleepHookRunsAfterTheDrain) {
  json pod = annotatedPod();
  pod["spec"]["containers"][0]["ports"] = {{{"containerPort", 8080}},
                                            {{"name", "admin"}, {"containerPort", 9000}}};
  pod["spec"]["containers"][0]["lifecycle"] = {
      {"preStop", {{"httpGet", {{"path", "/quiesce"}, {"port", "admin"}}}}}};
  const json out = inject(injector(), pod);
  EXPECT_EQ(out["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["path"], "/v1/drain");
  const json moved =
      json::parse(env(out["spec"]["initContainers"][0], "KSHARD_APP_PRESTOP"));
  EXPECT_EQ(moved["httpGet"]["path"], "/quiesce");
  EXPECT_EQ(moved["httpGet"]["port"], 9000) << "a named port is resolved for the sidecar";

  pod["spec"]["containers"][0]["lifecycle"] = {{"preStop", {{"sleep", {{"seconds", 5}}}}}};
  const json slept = inject(injector(), pod);
  EXPECT_EQ(json::parse(env(slept["spec"]["initContainers"][0], "KSHARD_APP_PRESTOP")),
            json({{"sleep", {{"seconds", 5}}}}));
}

TEST_F(SidecarInjectorTest, KeepsAnExecHookWithAWarningAndALongerGracePeriod) {
  json pod = annotatedPod();
  pod["spec"]["containers"][0]["lifecycle"] = {
      {"preStop", {{"exec", {{"command", {"sleep", "1"}}}}}}};
  pod["spec"]["terminationGracePeriodSeconds"] = 300;
  std::vector<std::string> warnings;
  const auto inj = injector();
  auto patch = inj.patchFor(pod, "demo", &warnings);
  ASSERT_TRUE(patch.ok());
  const json out = pod.patch(*patch);
  EXPECT_TRUE(out["spec"]["containers"][0]["lifecycle"]["preStop"].contains("exec"));
  EXPECT_EQ(out["spec"]["terminationGracePeriodSeconds"], 300);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("only after the app has exited"), std::string::npos) << warnings[0];
  // The review carries it to kubectl.
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "u1"}, {"namespace", "demo"}, {"operation", "CREATE"},
                         {"object", pod}}}};
  const json answer = json::parse(inj.review(review.dump()).body);
  EXPECT_EQ(answer["response"]["warnings"].size(), 1u) << answer.dump();
}

TEST_F(SidecarInjectorTest, IsIdempotent) {
  const auto inj = injector();
  const json once = inject(inj, annotatedPod());
  auto again = inj.patchFor(once, "demo");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty()) << again->dump();
}

TEST_F(SidecarInjectorTest, LeavesPodsWithoutTheAnnotationAlone) {
  json pod = annotatedPod();
  pod["metadata"]["annotations"]["kshard.io/inject"] = "false";
  auto patch = injector().patchFor(pod, "demo");
  ASSERT_TRUE(patch.ok());
  EXPECT_TRUE(patch->empty());
}

TEST_F(SidecarInjectorTest, ShardMapNameFromAnnotationThenLabels) {
  json pod = annotatedPod();
  pod["metadata"]["annotations"]["kshard.io/shard-map"] = "orders";
  EXPECT_EQ(inject(injector(), pod)["metadata"]["labels"]["kshard.io/shard-map"], "orders");
  json plain = annotatedPod();
  plain["metadata"]["labels"] = {{"app", "billing"}};
  EXPECT_EQ(inject(injector(), plain)["metadata"]["labels"]["kshard.io/shard-map"], "billing");
  json bare = annotatedPod();
  bare["metadata"].erase("labels");
  bare["metadata"]["annotations"]["kshard.io/shard-map"] = "x";
  EXPECT_EQ(inject(injector(), bare)["metadata"]["labels"]["kshard.io/shard-map"], "x");
}

TEST_F(SidecarInjectorTest, RefusesPodsItCannotServe) {
  json noName = annotatedPod();
  noName["metadata"].erase("labels");
  EXPECT_NE(injector().patchFor(noName, "demo").status().message().find("kshard.io/shard-map"),
            std::string::npos);
  json badPort = annotatedPod();
  badPort["metadata"]["annotations"]["kshard.io/app-port"] = "http";
  EXPECT_EQ(injector().patchFor(badPort, "demo").status().code(), StatusCode::kInvalidArgument);
  json clash = annotatedPod();
  clash["metadata"]["annotations"]["kshard.io/app-port"] = "7101";
  EXPECT_FALSE(injector().patchFor(clash, "demo").ok());
  json badName = annotatedPod();
  badName["metadata"]["annotations"]["kshard.io/shard-map"] = "Not_A_Name";
  EXPECT_FALSE(injector().patchFor(badName, "demo").ok());
}

TEST_F(SidecarInjectorTest, RegularContainerWhenNativeSidecarsAreOff) {
  InjectionConfig cfg;
  cfg.nativeSidecar = false;
  const json pod = inject(injector(cfg), annotatedPod());
  EXPECT_FALSE(pod["spec"].contains("initContainers"));
  ASSERT_EQ(pod["spec"]["containers"].size(), 2u);
  EXPECT_EQ(pod["spec"]["containers"][1]["name"], "kshard-sidecar");
  EXPECT_FALSE(pod["spec"]["containers"][1].contains("restartPolicy"));
}

TEST_F(SidecarInjectorTest, AnswersAdmissionReviewsWithABase64JsonPatch) {
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                         {"operation", "CREATE"},
                         {"namespace", "demo"},
                         {"object", annotatedPod()}}}};
  const auto answer = injector().review(review.dump());
  ASSERT_EQ(answer.httpStatus, 200);
  const json out = json::parse(answer.body);
  EXPECT_EQ(out["kind"], "AdmissionReview");
  EXPECT_EQ(out["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(out["response"]["allowed"], true);
  EXPECT_EQ(out["response"]["patchType"], "JSONPatch");
  const auto patch = base64Decode(out["response"]["patch"].get<std::string>());
  ASSERT_TRUE(patch.has_value());
  const json patched = annotatedPod().patch(json::parse(*patch));
  EXPECT_EQ(patched["spec"]["initContainers"][0]["name"], "kshard-sidecar");
}

TEST_F(SidecarInjectorTest, DeniesWithTheReason) {
  json pod = annotatedPod();
  pod["metadata"]["annotations"]["kshard.io/app-port"] = "0";
  const json review = {{"kind", "AdmissionReview"},
                       {"request", {{"uid", "u1"}, {"operation", "CREATE"}, {"object", pod}}}};
  const json out = json::parse(injector().review(review.dump()).body);
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_NE(out["response"]["status"]["message"].get<std::string>().find("app-port"),
            std::string::npos);
}

TEST_F(SidecarInjectorTest, MalformedReviewsGetAnErrorNeverACrash) {
  const auto inj = injector();
  for (const char* body :
       {"", "{", "[]", "null", R"({"kind":"Pod"})", R"({"kind":"AdmissionReview"})",
        R"({"kind":"AdmissionReview","request":{}})",
        R"({"kind":"AdmissionReview","request":{"uid":7}})"}) {
    EXPECT_EQ(inj.review(body).httpStatus, 400) << body;
  }
  // A well-formed review of a malformed pod is denied, not failed.
  const json weird = {
      {"kind", "AdmissionReview"},
      {"request", {{"uid", "u"}, {"operation", "CREATE"}, {"object", {{"spec", 3}}}}}};
  const json out = json::parse(inj.review(weird.dump()).body);
  EXPECT_EQ(out["response"]["allowed"], false);
}

TEST(AppContainerIndex, IsTheContainerThatDeclaresTheAppPortElseTheFirst) {
  const json spec = json::parse(R"({"containers": [
    {"name": "proxy", "ports": [{"containerPort": 9000}]},
    {"name": "logs"},
    {"name": "app", "ports": [{"name": "http", "containerPort": 8080}]}]})");
  EXPECT_EQ(appContainerIndex(spec, 8080), 2u);
  EXPECT_EQ(appContainerIndex(spec, 9000), 0u);
  EXPECT_EQ(appContainerIndex(spec, 7000), 0u) << "no container declares it: the first";
  EXPECT_EQ(appContainerIndex(json::parse(R"({"containers": []})"), 8080), std::nullopt);
  EXPECT_EQ(appContainerIndex(json::object(), 8080), std::nullopt);
}

TEST(DrainGracePeriodSeconds, AddsHandoffMarginAndUnregisterHoldAndSaturates) {
  InjectionConfig cfg;
  cfg.gracePeriodMarginSeconds = 15;
  cfg.unregisterHoldSeconds = 60;
  EXPECT_EQ(drainGracePeriodSeconds(std::chrono::seconds(30), cfg), 30 + 15 + 60);
  EXPECT_EQ(drainGracePeriodSeconds(std::chrono::milliseconds(1500), cfg), 1 + 15 + 60)
      << "whole seconds of the handoff";
  cfg.unregisterHoldSeconds = INT64_MAX - 10;
  EXPECT_EQ(drainGracePeriodSeconds(std::chrono::seconds(30), cfg), INT64_MAX);
}

}  // namespace
}  // namespace kshard::manager
