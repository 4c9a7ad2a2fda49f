#include "operator/pod_authenticator.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "kube/api_request.h"
#include "kube/resource.h"

namespace kshard::manager {
namespace {

constexpr std::string_view kServiceAccountPrefix = "system:serviceaccount:";
constexpr char kPodNameExtra[] = "authentication.kubernetes.io/pod-name";
constexpr char kPodUidExtra[] = "authentication.kubernetes.io/pod-uid";

// The single value of user.extra[key], or empty.
std::string extraValue(const nlohmann::json& user, const char* key) {
  auto extra = user.find("extra");
  if (extra == user.end() || !extra->is_object()) return {};
  auto values = extra->find(key);
  if (values == extra->end() || !values->is_array() || values->size() != 1 ||
      !(*values)[0].is_string()) {
    return {};
  }
  return (*values)[0].get<std::string>();
}

}  // namespace

nlohmann::json tokenReviewObject(const std::string& token, const std::string& audience) {
  return {{"apiVersion", "authentication.k8s.io/v1"},
          {"kind", "TokenReview"},
          {"spec", {{"token", token}, {"audiences", nlohmann::json::array({audience})}}}};
}

StatusOr<PodIdentity> identityFromTokenReview(const nlohmann::json& review,
                                              const std::string& audience) {
  if (!review.is_object() || !review.contains("status") || !review["status"].is_object()) {
    return unauthenticated("the TokenReview has no status");
  }
  const auto& status = review["status"];
  if (!status.value("authenticated", false)) {
    std::string why = status.value("error", std::string());
    return unauthenticated("the token is not valid" + (why.empty() ? "" : ": " + why));
  }
  // An API server that does not support audiences answers without them; one that does lists
  // those the token is valid for, which must include ours.
  if (auto audiences = status.find("audiences"); audiences != status.end()) {
    if (!audiences->is_array() ||
        std::find(audiences->begin(), audiences->end(), audience) == audiences->end()) {
      return unauthenticated("the token is not valid for audience \"" + audience + "\"");
    }
  }
  const nlohmann::json user = status.value("user", nlohmann::json::object());
  const std::string username = user.value("username", std::string());
  if (username.rfind(kServiceAccountPrefix, 0) != 0) {
    return unauthenticated("the token belongs to " + (username.empty() ? "nobody" : username) +
                           ", not to a service account");
  }
  const std::string rest = username.substr(kServiceAccountPrefix.size());
  const auto colon = rest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
    return unauthenticated("malformed service-account user name " + username);
  }
  PodIdentity id;
  id.ns = rest.substr(0, colon);
  id.serviceAccount = rest.substr(colon + 1);
  id.pod = extraValue(user, kPodNameExtra);
  id.uid = extraValue(user, kPodUidExtra);
  if (id.pod.empty() || id.uid.empty()) {
    return unauthenticated("the token of " + username +
                           " is not bound to a pod (use the projected token the injector mounts)");
  }
  return id;
}

TokenReviewAuthenticator::TokenReviewAuthenticator(kube::Client& api, Clock& clock,
                                                   kube::TokenVerifier* verifier,
                                                   TokenReviewOptions options)
    : api_(api), clock_(clock), verifier_(verifier), options_(std::move(options)) {}

std::size_t TokenReviewAuthenticator::reviews() const {
  std::lock_guard lock(mu_);
  return reviews_;
}

std::optional<StatusOr<PodIdentity>> TokenReviewAuthenticator::cachedLocked(
    const std::string& token, SteadyTime now) {
  for (auto* cache : {&identities_, &refusals_}) {
    auto it = cache->find(token);
    if (it == cache->end()) continue;
    if (it->second.expires > now) return it->second.answer;
    cache->erase(it);
  }
  return std::nullopt;
}

StatusOr<PodIdentity> TokenReviewAuthenticator::verifyLocally(const std::string& token) {
  if (verifier_ == nullptr) return unavailable("no local verification");
  auto claims = verifier_->verify(token);
  if (!claims.ok()) return claims.status();
  if (claims->podName.empty() || claims->podUid.empty()) {
    return unauthenticated("the token of " + claims->subject + " is not bound to a pod");
  }
  return PodIdentity{claims->namespace_, claims->serviceAccount, claims->podName, claims->podUid};
}

void TokenReviewAuthenticator::authenticate(const std::string& token, Callback done) {
  if (token.empty()) {
    done(unauthenticated("no bearer token"));
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (auto cached = cachedLocked(token, clock_.now())) {
      done(std::move(*cached));
      return;
    }
  }
  if (verifier_ != nullptr) {
    auto claims = verifier_->verify(token);
    if (!claims.ok()) {
      done(claims.status().code() == StatusCode::kUnauthenticated
               ? unauthenticated("the token does not verify: " + claims.status().message())
               : claims.status());
      return;
    }
    if (claims->podName.empty() || claims->podUid.empty()) {
      done(unauthenticated("the token of " + claims->subject +
                           " is not bound to a pod (use the projected token the injector mounts)"));
      return;
    }
  }
  {
    std::lock_guard lock(mu_);
    auto [waiting, first] = reviewing_.try_emplace(token);
    waiting->second.push_back(std::move(done));
    if (!first) return;  // its review is in flight
    ++reviews_;
  }
  review(token);
}

void TokenReviewAuthenticator::review(const std::string& token) {
  // A TokenReview is created without a name (nothing is stored): not createRequest's case.
  kube::ApiRequest review;
  review.method = http::Method::kPost;
  review.path = kube::resources::kTokenReviews.collectionPath("");
  review.body = tokenReviewObject(token, options_.audience);
  review.description = "create tokenreviews.authentication.k8s.io";
  api_.callAsync(std::move(review), [this, token](StatusOr<nlohmann::json> answer) {
    if (!answer.ok()) {
      reviewed(token, unavailable("cannot review the token with the Kubernetes API: " +
                                  answer.status().message()));
      return;
    }
    reviewed(token, identityFromTokenReview(*answer, options_.audience));
  });
}

void TokenReviewAuthenticator::reviewed(const std::string& token, StatusOr<PodIdentity> answer) {
  std::vector<Callback> waiting;
  {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.now();
    // Only what the API server decided is kept: an outage decides nothing.
    const bool refused = answer.status().code() == StatusCode::kUnauthenticated;
    if (answer.ok() || refused) {
      auto& cache = answer.ok() ? identities_ : refusals_;
      const std::size_t most = answer.ok() ? options_.cacheEntries : options_.refusalEntries;
      if (cache.size() >= most) {
        std::erase_if(cache, [now](const auto& e) { return e.second.expires <= now; });
        if (cache.size() >= most) cache.clear();
      }
      cache.insert_or_assign(
          token, Entry{answer, now + (answer.ok() ? options_.cacheTtl : options_.refusalTtl)});
    }
    auto it = reviewing_.find(token);
    if (it != reviewing_.end()) {
      waiting = std::move(it->second);
      reviewing_.erase(it);
    }
  }
  for (auto& done : waiting) done(answer);
}

}  // namespace kshard::manager
