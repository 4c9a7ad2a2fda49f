#include "operator/kube_clients.h"

#include <chrono>

namespace kshard::manager {
namespace {

kube::ClientOptions optionsOf(const KubeClientsOptions& o, double qps, int burst,
                              Duration maxWait) {
  kube::ClientOptions c;
  c.userAgent = o.userAgent;
  c.qps = qps;
  c.burst = burst;
  c.maxRateLimitWait = maxWait;
  return c;
}

constexpr double kElectionQps = 5;
constexpr int kElectionBurst = 10;
constexpr auto kReviewsMaxWait = std::chrono::seconds(5);

}  // namespace

KubeClients::KubeClients(http::Client& transport, Scheduler& scheduler, const Logger& logger,
                         const KubeClientsOptions& options,
                         std::shared_ptr<kube::TokenSource> token, const std::string& pathPrefix)
    : apiRandom_(options.seed),
      electionRandom_(options.seed + 1),
      reviewsRandom_(options.seed + 2),
      api_(transport, scheduler, apiRandom_, logger,
           optionsOf(options, options.qps, options.burst, kube::ClientOptions{}.maxRateLimitWait),
           token, pathPrefix),
      election_(
          transport, scheduler, electionRandom_, logger,
          optionsOf(options, kElectionQps, kElectionBurst, kube::ClientOptions{}.maxRateLimitWait),
          token, pathPrefix),
      reviews_(transport, scheduler, reviewsRandom_, logger,
               optionsOf(options, options.qps, options.burst, kReviewsMaxWait), token, pathPrefix) {
}

}  // namespace kshard::manager
