#include "sidecar/token_authorizer.h"

#include <algorithm>

#include "protocol/audiences.h"
#include "protocol/wire.h"

namespace kshard::sidecar {

TokenAuthorizer::TokenAuthorizer(IssuerKeys& keys, const RoutingTable& table, const Clock& clock,
                                 TokenAuthorizerOptions options)
    : table_(table),
      clock_(clock),
      options_(std::move(options)),
      operatorTokens_(keys, clock,
                      {protocol::sidecarAudience(options_.shardMap), options_.maxCachedTokens}),
      peerTokens_(keys, clock,
                  {protocol::peerAudience(options_.shardMap), options_.maxCachedTokens}),
      answerTokens_(keys, clock,
                    {protocol::mapAnswerAudience(options_.shardMap), options_.maxCachedTokens}) {}

StatusOr<kube::JwtClaims> TokenAuthorizer::verify(const http::Request& request,
                                                  kube::TokenVerifier& verifier) {
  const auto header = request.headers.get(protocol::kAuthorizationHeader);
  const std::string_view token = kube::bearerToken(header.value_or(""));
  if (token.empty()) {
    return unauthenticated("no bearer token: the caller must send a service-account token for "
                           "audience \"" +
                           verifier.audience() + "\"");
  }
  return verifier.verify(token);
}

Status TokenAuthorizer::authorizeOperator(const http::Request& request) {
  return operatorClaims(request, operatorTokens_);
}

Status TokenAuthorizer::authorizeManagerAnswer(const http::Request& answer) {
  return operatorClaims(answer, answerTokens_);
}

Status TokenAuthorizer::operatorClaims(const http::Request& request,
                                       kube::TokenVerifier& verifier) {
  auto claims = verify(request, verifier);
  if (!claims.ok()) return claims.status();
  if (claims->subject != options_.operatorSubject) {
    return permissionDenied("only " + options_.operatorSubject + " may call this; the token is " +
                            claims->subject);
  }
  return {};
}

StatusOr<kube::JwtClaims> TokenAuthorizer::peerClaims(const http::Request& request) {
  auto claims = verify(request, peerTokens_);
  if (!claims.ok()) return claims.status();
  if (claims->podName.empty()) {
    return permissionDenied("the token of " + claims->subject + " is not bound to a pod");
  }
  if (claims->namespace_ != options_.ns) {
    return permissionDenied("pod " + claims->namespace_ + "/" + claims->podName +
                            " is not in namespace " + options_.ns);
  }
  return claims;
}

Status TokenAuthorizer::admitPeer(const http::Request& head) { return peerClaims(head).status(); }

Status TokenAuthorizer::authorizePeer(const http::Request& request) {
  auto claims = peerClaims(request);
  if (!claims.ok()) return claims.status();
  const auto snapshot = table_.snapshot();
  if (const RouteOwner* p = snapshot->podNamed(claims->podName)) {
    if (p->uid == claims->podUid) return {};
    return permissionDenied("pod " + claims->podName + " has uid " + p->uid + " in ShardMap " +
                            options_.shardMap + ", the token says " + claims->podUid);
  }
  // A pod that has just drained and unregistered still forwards the requests its app had in
  // flight, each for at most sendTimeout: it stays accepted for twice that after it left.
  const SteadyTime now = clock_.now();
  for (const DepartedPod& d : snapshot->departed) {
    if (d.pod == claims->podName && d.uid == claims->podUid &&
        now - d.at <= 2 * snapshot->spec.sendTimeout) {
      return {};
    }
  }
  // Not registered in this copy of the status: a pod that registered a moment ago, before this
  // sidecar saw the new status, or a pod of another ShardMap. The sender retries either way.
  return unavailable("pod " + claims->podName + " is not a registered pod of ShardMap " +
                     options_.shardMap + " in this sidecar's view (epoch " +
                     std::to_string(snapshot->epoch) + ")");
}

}  // namespace kshard::sidecar
