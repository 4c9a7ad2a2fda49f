// PodAuthenticator: who is calling the manager API. A sidecar sends its pod's projected
// service-account token (audience "kshard", mounted by the injector) as a bearer token on
// register, unregister and notify-unhealthy; the operator asks the API server who it belongs to
// with a TokenReview. A bound token names the pod it was issued for (user.extra
// "authentication.kubernetes.io/pod-name" and "…/pod-uid"), so the operator can check that a pod
// registers only itself.
//
//   TokenReviewAuthenticator auth(api, clock, {.audience = "kshard"});
//   auth.authenticate(token, [](StatusOr<PodIdentity> who) { ... });
//
// Unauthenticated: the token is not valid for the audience (or names no pod); Unavailable: the
// API server could not be asked (nothing may be concluded). Verified identities are cached for
// `cacheTtl` (a token stays valid for its lifetime; a deleted pod's token stops being valid,
// which the cache notices at most `cacheTtl` later, while the pod informer already reports the
// pod gone). Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "kube/client.h"

namespace kshard::manager {

// The audience of the tokens sidecars send to the operator.
inline constexpr char kTokenAudience[] = "kshard";

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
};

struct TokenReviewOptions {
  std::string audience = kTokenAudience;
  Duration cacheTtl = std::chrono::seconds(60);
  std::size_t cacheEntries = 4096;
};

class TokenReviewAuthenticator final : public PodAuthenticator {
 public:
  TokenReviewAuthenticator(kube::Client& api, Clock& clock, TokenReviewOptions options = {});
  void authenticate(const std::string& token, Callback done) override;
  std::size_t reviews() const;  // TokenReviews sent (for tests and metrics)

 private:
  struct Entry {
    PodIdentity identity;
    SteadyTime expires;
  };
  kube::Client& api_;
  Clock& clock_;
  const TokenReviewOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> cache_;  // token -> verified identity
  std::size_t reviews_ = 0;
};

}  // namespace kshard::manager
