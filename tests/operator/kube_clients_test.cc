// The operator's Kubernetes clients: whatever the manager API makes the operator send, the
// leader's Lease renewal goes out at once.
#include "operator/kube_clients.h"

#include <gtest/gtest.h>

#include "kube/lease_lock.h"
#include "operator/pod_authenticator.h"
#include "tests/kube/fake_transport.h"

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

TEST(KubeClientsTest, ALeaseRenewalGoesOutAtOnceWhateverFloodsTheOtherClients) {
  kube::testing::FakeTransport transport;
  transport.setHandler([](const http::Request&) {
    return std::optional<StatusOr<http::Response>>(kube::testing::jsonResponse(200, "{}"));
  });
  ManualScheduler scheduler;
  KubeClients clients(transport, scheduler, Logger("t", LogLevel::kError, [](std::string_view) {}),
                      {.userAgent = "kshard-operator/test", .qps = 50, .burst = 100}, nullptr, "");
  // Thousands of TokenReviews (callers of the manager API), and as many of the leader's own
  // requests: both use up their rate limits.
  int refusedReviews = 0;
  for (int i = 0; i < 5000; ++i) {
    kube::ApiRequest review;
    review.method = http::Method::kPost;
    review.path = "/apis/authentication.k8s.io/v1/tokenreviews";
    review.body = tokenReviewObject("t-" + std::to_string(i), "kshard");
    review.description = "create tokenreviews";
    clients.reviews().callAsync(std::move(review), [&](StatusOr<nlohmann::json> r) {
      if (r.status().code() == StatusCode::kResourceExhausted) ++refusedReviews;
    });
    clients.api().callAsync(kube::getRequest(kube::resources::kPods, "demo", "p"),
                            [](StatusOr<nlohmann::json>) {});
  }
  // Beyond the burst, 5 s at 50/s queue; the rest are refused at once instead of waiting.
  EXPECT_EQ(refusedReviews, 5000 - 100 - 250);
  const std::size_t sent = transport.requestCount();
  kube::LeaseLock lease(clients.election(), "kshard-system", "kshard-operator", 5000ms);
  std::optional<Status> renewed;
  lease.get([&](StatusOr<kube::LeaderElectionRecord> r) { renewed = r.status(); });
  ASSERT_TRUE(renewed.has_value()) << "the Lease waited behind the flood";
  EXPECT_TRUE(renewed->ok()) << renewed->toString();
  ASSERT_EQ(transport.requestCount(), sent + 1);
  EXPECT_NE(transport.requests().back().target.find("/leases/kshard-operator"), std::string::npos)
      << transport.requests().back().target;
}

}  // namespace
}  // namespace kshard::manager
