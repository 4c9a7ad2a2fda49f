// RequestAuthorizer: decides whether a caller may use the peer API. Control calls (ping, assign,
// unassign) may come only from the operator; forwarded messages only from sidecars of the same
// ShardMap. The check is a seam so the API handlers do not know how identities are proven.
#pragma once

#include "base/status.h"
#include "http/message.h"

namespace kshard::sidecar {

class RequestAuthorizer {
 public:
  virtual ~RequestAuthorizer() = default;
  // OK, Unauthenticated (no or invalid credentials) or PermissionDenied (valid, wrong caller).
  virtual Status authorizeOperator(const http::Request& request) = 0;
  virtual Status authorizePeer(const http::Request& request) = 0;
  // That an answer of the manager (its Authorization header: the answer's signature) is the
  // operator's, for this map (protocol::mapAnswerAudience).
  virtual Status authorizeManagerAnswer(const http::Request& answer) = 0;
  // What the peer server checks from a request's head, before it reads the body (PeerApi::admit):
  // that the caller holds a peer credential of this map at all. Whether its pod is registered
  // (authorizePeer's Unavailable: a pod registered a moment ago) is left to the route. OK,
  // Unauthenticated, PermissionDenied, or Unavailable when it cannot be told (no keys yet).
  virtual Status admitPeer(const http::Request& head) { return authorizePeer(head); }
};

// Accepts every caller: for tests, and for clusters that secure the pod network otherwise.
class AllowAllAuthorizer final : public RequestAuthorizer {
 public:
  Status authorizeOperator(const http::Request&) override { return {}; }
  Status authorizePeer(const http::Request&) override { return {}; }
  Status authorizeManagerAnswer(const http::Request&) override { return {}; }
};

}  // namespace kshard::sidecar
