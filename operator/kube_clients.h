// KubeClients: the operator's Kubernetes API clients, one per kind of traffic, each with a rate
// limit of its own (kube/rate_limiter.h) over one transport:
//
//   api       informers, ShardMap status writes, pods, Events, RoleBindings:
//   --kube-qps/--kube-burst election  the leader's Lease, and nothing else: 5 requests/s, burst 10
//   (a renewal is a GET and
//             a PUT every retry period, 2 s)
//   reviews   TokenReviews for the manager API's callers and the issuer keys they are verified
//             with: --kube-qps/--kube-burst, and a request that would wait more than 5 s for the
//             limit fails at once (the sidecar's call gives up after 10 s, and retries)
//
// Why: the leader must renew its Lease within the renew deadline (10 s) whatever else happens.
// With one limiter a few thousand calls to :7200, each a TokenReview, queued the renewals behind
// them, and the leader lost its Lease again and again. No traffic the manager API can cause now
// delays a renewal or the leader's own writes.
#pragma once

#include <memory>
#include <string>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "http/client.h"
#include "kube/client.h"
#include "kube/token_source.h"

namespace kshard::manager {

struct KubeClientsOptions {
  std::string userAgent;
  double qps = 50;
  int burst = 100;
  std::uint64_t seed = 1;  // of the clients' backoff jitter
};

class KubeClients {
 public:
  KubeClients(http::Client& transport, Scheduler& scheduler, const Logger& logger,
              const KubeClientsOptions& options, std::shared_ptr<kube::TokenSource> token,
              const std::string& pathPrefix);

  kube::Client& api() { return api_; }
  kube::Client& election() { return election_; }
  kube::Client& reviews() { return reviews_; }

 private:
  // Each client draws its jitter from a generator of its own (they are not shared between locks).
  SeededRandom apiRandom_, electionRandom_, reviewsRandom_;
  kube::Client api_;
  kube::Client election_;
  kube::Client reviews_;
};

}  // namespace kshard::manager
