// The webhook's guard rails in front of the injector: a body nested deeper than any pod is
// refused with 400 before it is parsed; others reach SidecarInjector::review.
#include "operator/admission_webhook.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace kshard::manager {
namespace {

using nlohmann::json;

SidecarInjector injector() {
  return SidecarInjector(
      InjectionConfig{}, [](const std::string&, const std::string&) { return std::nullopt; },
      Logger("test", LogLevel::kError, [](std::string_view) {}));
}

TEST(AdmissionWebhookTest, ABodyNestedDeeperThanAnyPodIsRefusedBeforeItIsParsed) {
  const SidecarInjector inj = injector();
  const AdmissionWebhook webhook(inj);
  // As large as the route takes, all of it one nesting.
  const std::string deep(AdmissionWebhook::kMaxBodyBytes, '[');
  const http::Response r = webhook.handle(deep);
  EXPECT_EQ(r.status, 400);
  const json body = json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "BadRequest");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("deeper than 64 levels (at byte 64)"),
            std::string::npos)
      << r.body;
}

TEST(AdmissionWebhookTest, AReviewWithinTheLimitsIsTheInjectorsToAnswer) {
  const SidecarInjector inj = injector();
  const AdmissionWebhook webhook(inj);
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "u-1"},
                         {"operation", "DELETE"},
                         {"namespace", "demo"},
                         {"object", {{"metadata", {{"name", "p"}}}}}}}};
  const http::Response r = webhook.handle(review.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  EXPECT_EQ(answer["response"]["uid"], "u-1");
  EXPECT_EQ(answer["response"]["allowed"], true);
  EXPECT_EQ(webhook.handle("{").status, 400) << "malformed JSON is the injector's 400";
}

}  // namespace
}  // namespace kshard::manager
