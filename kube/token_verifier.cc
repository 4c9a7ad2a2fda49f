#include "kube/token_verifier.h"

#include <chrono>

namespace kshard::kube {
namespace {

// A token for the audience and nothing else: one that another party would also take (several
// audiences) could be replayed there by whoever receives it here.
Status onlyFor(const JwtClaims& claims, const std::string& audience) {
  if (claims.audiences.size() == 1 && claims.audiences[0] == audience) return {};
  std::string all;
  for (const auto& a : claims.audiences) all += (all.empty() ? "" : ", ") + a;
  return unauthenticated("the token's audiences are [" + all + "]; this call needs a token for \"" +
                         audience + "\" only");
}

}  // namespace

TokenVerifier::TokenVerifier(IssuerKeys& keys, const Clock& clock, TokenVerifierOptions options)
    : keys_(keys), clock_(clock), options_(std::move(options)) {}

StatusOr<JwtClaims> TokenVerifier::verify(std::string_view token) {
  const auto set = keys_.current();
  if (set == nullptr) {
    return unavailable("the service-account issuer keys are not loaded yet");
  }
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch()).count();
  {
    std::lock_guard lock(mu_);
    if (cacheGeneration_ != set->generation) {
      cache_.clear();
      cacheGeneration_ = set->generation;
    }
    auto it = cache_.find(token);
    if (it != cache_.end()) {
      if (it->second.expiresAt >= now) {
        if (Status st = onlyFor(it->second, options_.audience); !st.ok()) return st;
        return it->second;
      }
      cache_.erase(it);
    }
  }
  // The cache is checked without leeway, so an entry never outlives the token; a token within
  // the leeway is verified afresh.
  auto claims =
      verifyJwt(token, set->keys, {set->issuer, options_.audience, now, options_.leewaySeconds});
  if (!claims.ok()) {
    if (claims.status().code() == StatusCode::kNotFound) {
      keys_.refreshSoon();
      return unauthenticated("token signed by an unknown key (" + claims.status().message() +
                             "); the keys are being refreshed");
    }
    return claims.status();
  }
  if (Status st = onlyFor(*claims, options_.audience); !st.ok()) return st;
  if (claims->expiresAt >= now) {
    std::lock_guard lock(mu_);
    if (cacheGeneration_ == set->generation) {
      if (cache_.size() >= options_.maxCachedTokens) cache_.clear();
      cache_.emplace(std::string(token), *claims);
    }
  }
  return claims;
}

std::size_t TokenVerifier::cachedTokens() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

}  // namespace kshard::kube
