// Unregistration's answers (operator/unregistration.h): the deferral of a held pod, and the
// refusal when its shards could not be unassigned.
#include "operator/unregistration.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

TEST(DeferredResponse, TellsTheSidecarToKeepServingAndWhenToAskAgain) {
  UnregisterHold hold{"2.0.0", 3, WallTime{}};
  const auto r = deferredResponse("old-a", hold, 12'500ms);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.headers.get("Retry-After"), "1");
  auto body = protocol::decodeUnregisterDeferred(r.body);
  ASSERT_TRUE(body.ok()) << body.status().toString();
  EXPECT_EQ(body->deferredForMs, 12'500);
  EXPECT_EQ(body->retryAfterMs, 1'000);
  EXPECT_EQ(body->version, "2.0.0");
  EXPECT_EQ(body->startingPods, 3);
  EXPECT_NE(body->message.find("3 starting pod(s) of version 2.0.0"), std::string::npos)
      << body->message;
  EXPECT_NE(body->message.find("12 s more"), std::string::npos) << body->message;
}

TEST(DeferredResponse, BeforeReplacementsCouldBeSeenItSaysSo) {
  const auto r = deferredResponse("old-a", UnregisterHold{"", 0, WallTime{}}, 4'000ms);
  auto body = protocol::decodeUnregisterDeferred(r.body);
  ASSERT_TRUE(body.ok());
  EXPECT_NE(body->message.find("until pods created with its delete would be seen"),
            std::string::npos)
      << body->message;
}

TEST(UnassignFailedResponse, ATimeoutIsAHandoffTimeout) {
  const auto timedOut = unassignFailedResponse(deadlineExceeded("slow"));
  EXPECT_EQ(timedOut.status, 504);
  EXPECT_NE(timedOut.body.find(protocol::errors::kHandoffTimeout), std::string::npos);
  const auto other = unassignFailedResponse(unavailable("refused"));
  EXPECT_EQ(other.status, 503);
  EXPECT_NE(other.body.find("it keeps them; retry the unregister"), std::string::npos);
}

}  // namespace
}  // namespace kshard::manager
