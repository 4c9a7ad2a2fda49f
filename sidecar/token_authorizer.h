// TokenAuthorizer: the peer API's callers proven by their projected service-account tokens
// (audience "kshard"), verified locally against the cluster's service-account issuer keys.
//
//   - ping, assign, unassign: only the operator's ServiceAccount (`operatorSubject`,
//     "system:serviceaccount:kshard-system:kshard").
//   - forwarded messages: only pods of this sidecar's ShardMap, i.e. a token bound to a pod of
//     this namespace that is registered in the cached ShardMap status (name and uid).
//
// Answers: Unauthenticated (no token, bad signature, expired, wrong audience or issuer),
// PermissionDenied (a valid token of someone else), Unavailable (cannot tell yet: the keys are not
// loaded, or the calling pod is not yet in this sidecar's copy of the status; the caller retries).
//
// Verified tokens are cached until they expire, so a forwarded message costs one hash lookup; the
// cache is dropped whenever the key set changes, so a key removed by rotation stops working at
// once. A token naming a key the set does not have makes the key source refresh (rate-limited).
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/issuer_keys.h"
#include "kube/jwt.h"
#include "kube/token_verifier.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

// The issuer's keys (kube/issuer_keys.h), shared with the operator, which checks its callers'
// tokens with them too.
using kube::ApiServerIssuerKeys;
using kube::FixedIssuerKeys;
using kube::IssuerKeys;
using kube::IssuerKeySet;

struct TokenAuthorizerOptions {
  std::string audience = "kshard";
  std::string operatorSubject;  // "system:serviceaccount:<namespace>:<name>"
  std::string ns;               // this pod's namespace
  std::string shardMap;         // for messages
  std::size_t maxCachedTokens = 4096;
};

class TokenAuthorizer final : public RequestAuthorizer {
 public:
  TokenAuthorizer(IssuerKeys& keys, const RoutingTable& table, const Clock& clock,
                  TokenAuthorizerOptions options);

  Status authorizeOperator(const http::Request& request) override;
  Status authorizePeer(const http::Request& request) override;

  // Verified tokens in the cache, for tests.
  std::size_t cachedTokens() const { return verifier_.cachedTokens(); }

 private:
  StatusOr<kube::JwtClaims> verify(const http::Request& request);

  const RoutingTable& table_;
  const Clock& clock_;
  const TokenAuthorizerOptions options_;
  kube::TokenVerifier verifier_;  // the cache of verified tokens (kube/token_verifier.h)
};

}  // namespace kshard::sidecar
