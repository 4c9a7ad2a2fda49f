#include "operator/injection_config.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

TEST(InjectionConfigTest, ReadsTheChartsFile) {
  auto cfg = parseInjectionConfig(R"(
image: "registry.example/kshard/sidecar:0.1.0"
imagePullPolicy: Always
logLevel: debug
apiPort: 7100
peerPort: 7201
adminPort: 7202
maxBodyBytes: 1048576
maxConcurrentStops: 16
maxPendingTells: 500
maxPendingTellBytes: 8388608
gracePeriodMarginSeconds: 20
resources:
  requests: {cpu: 50m, memory: 32Mi}
)");
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  EXPECT_EQ(cfg->image, "registry.example/kshard/sidecar:0.1.0");
  EXPECT_EQ(cfg->imagePullPolicy, "Always");
  EXPECT_EQ(cfg->peerPort, 7201);
  EXPECT_EQ(cfg->maxBodyBytes, 1048576);
  EXPECT_EQ(cfg->maxConcurrentStops, 16);
  EXPECT_EQ(cfg->maxPendingTells, 500);
  EXPECT_EQ(cfg->maxPendingTellBytes, 8388608);
  EXPECT_EQ(cfg->gracePeriodMarginSeconds, 20);
  EXPECT_EQ(cfg->resources["requests"]["memory"], "32Mi");
  EXPECT_TRUE(cfg->nativeSidecar);
  EXPECT_EQ(cfg->peerAuth, "token") << "injected sidecars check their callers unless told not to";
  EXPECT_EQ(cfg->operatorIdentity, "") << "empty: the operator's own";
  auto secured = parseInjectionConfig(
      "peerAuth: token\noperatorIdentity: system:serviceaccount:kshard-system:kshard\n");
  ASSERT_TRUE(secured.ok()) << secured.status().toString();
  EXPECT_EQ(secured->peerAuth, "token");
  EXPECT_EQ(secured->operatorIdentity, "system:serviceaccount:kshard-system:kshard");
}

TEST(InjectionConfigTest, ErrorsNameTheField) {
  EXPECT_EQ(parseInjectionConfig("peerPort: 0").status().message(), "peerPort: must be 1..65535");
  EXPECT_EQ(parseInjectionConfig("adminPort: x").status().message(),
            "adminPort: must be an integer");
  EXPECT_EQ(parseInjectionConfig("imagePullPolicy: Sometimes").status().message(),
            "imagePullPolicy: must be Always, IfNotPresent or Never");
  EXPECT_EQ(parseInjectionConfig("maxConcurrentStops: 0").status().message(),
            "maxConcurrentStops: must be 1..100000");
  EXPECT_EQ(parseInjectionConfig("maxPendingTells: -1").status().message(),
            "maxPendingTells: must be 1..1073741824");
  EXPECT_EQ(parseInjectionConfig("maxPendingTellBytes: 100").status().message(),
            "maxPendingTellBytes: must be 1024..1099511627776");
  EXPECT_FALSE(parseInjectionConfig("maxPendingTells: many").ok());
  EXPECT_EQ(parseInjectionConfig("resources: 3").status().message(),
            "resources: must be a mapping");
  EXPECT_EQ(parseInjectionConfig("peerAuth: maybe").status().message(),
            "peerAuth: must be token or none");
  EXPECT_EQ(parseInjectionConfig("operatorIdentity: kshard").status().message(),
            "operatorIdentity: must be system:serviceaccount:<namespace>:<name>, or empty for "
            "this operator's own");
  EXPECT_FALSE(
      parseInjectionConfig("peerAuth: token\noperatorIdentity: system:serviceaccount:Bad:x").ok());
  EXPECT_FALSE(parseInjectionConfig("[").ok());
  EXPECT_EQ(loadInjectionConfig("/nonexistent").status().message(),
            "injection config /nonexistent: cannot be read");
}

}  // namespace
}  // namespace kshard::manager
