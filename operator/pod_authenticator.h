// PodAuthenticator: who is calling the manager API. A sidecar sends its pod's projected
// service-account token (audience "kshard.io/operator", mounted by the injector) as a bearer token on
// register, unregister and notify-unhealthy; the operator asks the API server who it belongs to
// with a TokenReview, once the token has verified locally. A bound token names the pod it was
// issued for (user.extra "authentication.kubernetes.io/pod-name" and "…/pod-uid"), so the
// operator can check that a pod registers only itself.
//
//   kube::TokenVerifier verifier(issuerKeys, clock, {.audience = "kshard.io/operator"});
//   TokenReviewAuthenticator auth(api, clock, &verifier);
//   auth.authenticate(token, [](StatusOr<PodIdentity> who) { ... });
//
// Unauthenticated: the token is not valid for the audience (or names no pod); Unavailable: the
// API server could not be asked (nothing may be concluded). Verified identities are cached for
// `cacheTtl` (a token stays valid for its lifetime; a deleted pod's token stops being valid,
// which the cache notices at most `cacheTtl` later, while the pod informer already reports the
// pod gone). Thread-safe.
//
// The manager API asks before it reads anything else of the request (ManagerApi).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/token_verifier.h"
#include "protocol/audiences.h"

namespace kshard::manager {

// The audience of the tokens sidecars send to the operator (protocol/audiences.h).
inline const std::string kTokenAudience(protocol::kOperatorAudience);

struct PodIdentity {
  std::string ns;
  std::string serviceAccount;
  std::string pod;  // empty for a token not bound to a pod
  std::string uid;
  friend bool operator==(const PodIdentity&, const PodIdentity&) = default;
};

// The identity a TokenReview's answer shows. Unauthenticated unless the review says
// authenticated, for `audience`, a service account ("system:serviceaccount:{ns}:{name}") and a pod.
[[nodiscard]] StatusOr<PodIdentity> identityFromTokenReview(const nlohmann::json& review,
                                                            const std::string& audience);
// The TokenReview to create for `token`.
nlohmann::json tokenReviewObject(const std::string& token, const std::string& audience);

class PodAuthenticator {
 public:
  using Callback = std::function<void(StatusOr<PodIdentity>)>;
  virtual ~PodAuthenticator() = default;
  // Runs `done` once, on any thread (possibly before returning).
  virtual void authenticate(const std::string& token, Callback done) = 0;
  // What the token itself proves, without the API server: its signature, audience, expiry and
  // the pod it was bound to, not that the pod still exists. Unavailable when nothing can be
  // verified locally. For the calls that must go on while the API server is down (renew).
  virtual StatusOr<PodIdentity> verifyLocally(const std::string& token) {
    (void)token;
    return unavailable("no local verification");
  }
};

struct TokenReviewOptions {
  std::string audience = kTokenAudience;
  Duration cacheTtl = std::chrono::seconds(60);
  std::size_t cacheEntries = 4096;
  // Tokens the API server refused are refused again without a review for this long.
  Duration refusalTtl = std::chrono::seconds(10);
  std::size_t refusalEntries = 1024;
};

// Authenticates in three steps, cheapest first, so that a caller without a valid token costs
// neither a TokenReview nor the API client's rate limit (which the operator's other requests
// wait behind):
//   1. the caches: an identity verified within `cacheTtl`; a refusal by the API server within
//      `refusalTtl` (a deleted pod's token is still a valid JWT until it expires);
//   2. the token verified locally (`verifier`, kube/token_verifier.h): not a JWT, a bad
//      signature, another issuer or audience, expired, or not bound to a pod is refused here;
//      the issuer's keys not loaded yet is Unavailable;
//   3. a TokenReview, which decides (a bound token is valid only while its pod exists). Callers
//      with the same token while its review is in flight wait for that one review.
// Without a verifier (tests, clusters without issuer discovery) step 2 is skipped.
class TokenReviewAuthenticator final : public PodAuthenticator {
 public:
  TokenReviewAuthenticator(kube::Client& api, Clock& clock, kube::TokenVerifier* verifier,
                           TokenReviewOptions options = {});
  void authenticate(const std::string& token, Callback done) override;
  StatusOr<PodIdentity> verifyLocally(const std::string& token) override;
  std::size_t reviews() const;  // TokenReviews sent (for tests and metrics)

 private:
  struct Entry {
    StatusOr<PodIdentity> answer;  // an identity, or the API server's refusal
    SteadyTime expires;
  };
  // The cached answer for `token`, if one is fresh; under mu_.
  std::optional<StatusOr<PodIdentity>> cachedLocked(const std::string& token, SteadyTime now);
  void review(const std::string& token);
  void reviewed(const std::string& token, StatusOr<PodIdentity> answer);

  kube::Client& api_;
  Clock& clock_;
  kube::TokenVerifier* const verifier_;
  const TokenReviewOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> identities_;                 // token -> verified identity
  std::map<std::string, Entry> refusals_;                   // token -> the API server's refusal
  std::map<std::string, std::vector<Callback>> reviewing_;  // token -> callers waiting
  std::size_t reviews_ = 0;
};

}  // namespace kshard::manager
