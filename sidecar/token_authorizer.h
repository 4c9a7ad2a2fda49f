// TokenAuthorizer: the peer API's callers proven by their service-account tokens, verified
// locally against the cluster's service-account issuer keys. Each kind of caller needs a token
// whose only audience names this sidecar's ShardMap and the direction (protocol/audiences.h):
//
//   - ping, assign, unassign: only the operator's ServiceAccount (`operatorSubject`,
//     "system:serviceaccount:kshard-system:kshard"), with audience
//     "kshard.io/sidecar/<ns>/<map>", which the operator mints for this map alone. The operator's
//     token that a pod of another map receives does not open this one.
//   - the manager's answers to reads of the map's changes (sidecar/map_sync.h): only the
//     operator's ServiceAccount, with audience "kshard.io/map-answer/<ns>/<map>", which it gives
//     only to this map's pods; it opens nothing else.
//   - forwarded messages: only pods of this sidecar's ShardMap, i.e. a token with audience
//     "kshard.io/peer/<ns>/<map>" bound to a pod of this namespace that is registered in the
//     cached ShardMap status (name and uid). A token of another audience (the one a pod sends the
//     operator) is refused, so what a peer receives from another cannot be replayed elsewhere.
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
  std::string operatorSubject;  // "system:serviceaccount:<namespace>:<name>"
  std::string ns;               // this pod's namespace
  std::string shardMap;         // "<namespace>/<name>": names the audiences the callers need
  std::size_t maxCachedTokens = 4096;
};

class TokenAuthorizer final : public RequestAuthorizer {
 public:
  TokenAuthorizer(IssuerKeys& keys, const RoutingTable& table, const Clock& clock,
                  TokenAuthorizerOptions options);

  Status authorizeOperator(const http::Request& request) override;
  Status authorizePeer(const http::Request& request) override;
  Status authorizeManagerAnswer(const http::Request& answer) override;
  Status admitPeer(const http::Request& head) override;

  // Verified tokens in the cache, for tests.
  std::size_t cachedTokens() const {
    return operatorTokens_.cachedTokens() + peerTokens_.cachedTokens();
  }

 private:
  // The claims of the request's token, checked by `verifier` (one audience).
  StatusOr<kube::JwtClaims> verify(const http::Request& request, kube::TokenVerifier& verifier);
  // OK when the request's token, checked by `verifier`, is the operator's.
  Status operatorClaims(const http::Request& request, kube::TokenVerifier& verifier);
  // The claims of a peer token of this map bound to a pod of this namespace.
  StatusOr<kube::JwtClaims> peerClaims(const http::Request& request);

  const RoutingTable& table_;
  const Clock& clock_;
  const TokenAuthorizerOptions options_;
  // Each with its audience and its cache of verified tokens (kube/token_verifier.h).
  kube::TokenVerifier operatorTokens_;  // "kshard.io/sidecar/<ns>/<map>"
  kube::TokenVerifier peerTokens_;      // "kshard.io/peer/<ns>/<map>"
  kube::TokenVerifier answerTokens_;    // "kshard.io/map-answer/<ns>/<map>"
};

}  // namespace kshard::sidecar
