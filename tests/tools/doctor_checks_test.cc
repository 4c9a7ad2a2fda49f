#include "tools/doctor_checks.h"

#include <gtest/gtest.h>

namespace kshard::tools {
namespace {

using nlohmann::json;

json withCondition(const std::string& type, const std::string& status) {
  return {{"status", {{"conditions", json::array({{{"type", type}, {"status", status}}})}}}};
}

TEST(DoctorChecksTest, CrdMustExistAndBeEstablished) {
  EXPECT_FALSE(checkCrd(std::nullopt).ok);
  EXPECT_NE(checkCrd(std::nullopt).detail.find("crds/shardmap.yaml"), std::string::npos);
  EXPECT_FALSE(checkCrd(withCondition("Established", "False")).ok);
  EXPECT_TRUE(checkCrd(withCondition("Established", "True")).ok);
  const CheckResult segments =
      checkCrd(std::nullopt, "shardmapsegments.kshard.io", "crds/shardmapsegment.yaml");
  EXPECT_FALSE(segments.ok);
  EXPECT_NE(segments.detail.find("kubectl apply -f crds/shardmapsegment.yaml"), std::string::npos);
  const CheckResult entities =
      checkCrd(std::nullopt, "shardentities.kshard.io", "crds/shardentities.yaml");
  EXPECT_FALSE(entities.ok);
  EXPECT_NE(entities.detail.find("kubectl apply -f crds/shardentities.yaml"), std::string::npos);
}

TEST(DoctorChecksTest, OneReadyOperatorPodIsEnough) {
  EXPECT_FALSE(checkOperatorPods({}).ok);
  EXPECT_FALSE(checkOperatorPods({withCondition("Ready", "False")}).ok);
  const auto r =
      checkOperatorPods({withCondition("Ready", "False"), withCondition("Ready", "True")});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.detail, "1 of 2 ready");
}

TEST(DoctorChecksTest, LeaseMustBeHeldAndFresh) {
  const WallTime now = WallTime{} + std::chrono::seconds(1795343462);
  EXPECT_FALSE(checkLease(std::nullopt, now).ok);
  json lease = {{"spec",
                 {{"holderIdentity", "kshard-operator-abc"},
                  {"leaseDurationSeconds", 15},
                  {"renewTime", "2026-11-22T10:30:55.000000Z"}}}};
  const auto fresh = checkLease(lease, now);
  EXPECT_TRUE(fresh.ok) << fresh.detail;
  EXPECT_EQ(fresh.detail, "kshard-operator-abc leads, renewed 7 s ago");
  lease["spec"]["renewTime"] = "2026-11-22T10:30:00.000000Z";
  EXPECT_FALSE(checkLease(lease, now).ok);
  lease["spec"]["holderIdentity"] = "";
  EXPECT_FALSE(checkLease(lease, now).ok);
}

TEST(DoctorChecksTest, WebhookNeedsACaBundle) {
  EXPECT_FALSE(checkWebhook(std::nullopt).ok);
  json config = {{"webhooks", json::array({{{"name", "x"}, {"clientConfig", json::object()}}})}};
  EXPECT_FALSE(checkWebhook(config).ok);
  config["webhooks"][0]["clientConfig"]["caBundle"] = "LS0t";
  EXPECT_TRUE(checkWebhook(config).ok);
}

TEST(DoctorChecksTest, ReportMarksFailures) {
  EXPECT_EQ(formatResults({{"a", true, "fine"}, {"b", false, "broken"}}),
            "ok    a: fine\nFAIL  b: broken\n");
}

}  // namespace
}  // namespace kshard::tools
