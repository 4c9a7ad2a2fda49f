// TokenVerifier: projected service-account tokens verified locally (kube/jwt.h) against the
// issuer's keys (kube/issuer_keys.h), for one audience (a token's only one), with a cache of the
// verified ones.
//
//   kube::TokenVerifier verifier(keys, clock, {.audience = "kshard.io/operator"});
//   auto claims = verifier.verify(token);  // then authorise by claims->subject, ->podName, ...
//
// Answers: the claims; Unauthenticated (malformed, bad signature, expired, another or a second
// audience, another issuer, a key the set lacks: the keys are then refreshed soon, rate-limited by
// the key source); Unavailable (the keys are not loaded yet: nothing may be concluded).
//
// Verified tokens are cached until they expire (checked without leeway, so an entry never
// outlives its token), at most `maxCachedTokens` (the cache starts over when full), so a caller
// that sends the same token again costs one hash lookup; the cache is dropped whenever the key
// set changes, so a key removed by rotation stops working at once. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/clock.h"
#include "base/status.h"
#include "kube/issuer_keys.h"
#include "kube/jwt.h"

namespace kshard::kube {

struct TokenVerifierOptions {
  std::string audience;
  std::size_t maxCachedTokens = 4096;
  std::int64_t leewaySeconds = 60;
};

class TokenVerifier {
 public:
  TokenVerifier(IssuerKeys& keys, const Clock& clock, TokenVerifierOptions options);

  [[nodiscard]] StatusOr<JwtClaims> verify(std::string_view token);

  const std::string& audience() const { return options_.audience; }
  // Verified tokens in the cache, for tests.
  std::size_t cachedTokens() const;

 private:
  IssuerKeys& keys_;
  const Clock& clock_;
  const TokenVerifierOptions options_;
  mutable std::mutex mu_;
  std::uint64_t cacheGeneration_ = 0;
  // Looked up by a string_view: no copy of the token per call.
  struct TokenHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, JwtClaims, TokenHash, std::equal_to<>> cache_;
};

}  // namespace kshard::kube
