// PeerApi: the sidecar's peer API on the pod IP (DESIGN.md "Peer API"):
//   POST /v1/peer/entities/{type}/{id}  a message forwarded by another sidecar
//   POST /v1/peer/singletons/{name}     the same, to a singleton (the entity route refuses its
//   type) GET  /v1/ping                       the operator's liveness check; lists the shards held
//   POST /v1/shards/assign              the operator gives shards (idempotent, epoch-fenced)
//   POST /v1/shards/unassign            the operator takes shards; answers once they are released
// (and POST /v1/peer/topics/{topic}, a publication for this pod: sidecar/topic_api.h)
// The operator's three commands name their target (pod, uid, sidecar incarnation): a sidecar
// answers one meant for anyone else 409 WrongTarget and does nothing. An assign or unassign whose
// epoch lies more than kMaxEpochLead past the epoch of this sidecar's copy of the map is answered
// 409 EpochTooFarAhead and does nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "base/logger.h"
#include "http/server.h"
#include "sidecar/entity_registry.h"
#include "sidecar/identity.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/routing_table.h"
#include "sidecar/sidecar_metrics.h"

namespace kshard::sidecar {

// How far past the epoch of its copy of the ShardMap a command's epoch may lie. The operator
// issues at most the persisted epoch + 1 (an unassign carries the epoch of the write after it),
// and every persisted epoch is a status write of this map, which the sidecar's watch shows within
// a second or so. 10,000 writes are more than three minutes of this one map taking the
// operator's whole API budget (--kube-qps 50): only a copy cut off from the API server for longer
// lags that far, and then the refused command changes nothing (a refused unassign leaves the
// shards where they were, a refused assign is sent again by a later round, and the map's own
// assignment is adopted once the watch catches up). What it prevents: a command with a forged or
// stolen credential fencing shards beyond any epoch the operator will reach (an unassign at
// 2^64 - 1 did it for good); the worst is now a fence 10,000 epochs ahead, which the map's epochs
// pass.
inline constexpr std::uint64_t kMaxEpochLead = 10'000;

class PeerApi {
 public:
  struct Options {
    std::size_t maxIdBytes = 1024;
  };

  PeerApi(Identity self, EntityRegistry& registry, RoutingTable& table,
          RequestAuthorizer& authorizer, SidecarMetrics& metrics, const Clock& clock, Logger logger,
          Options options);

  void addRoutes(http::Server& server);
  // The peer server's admission (http::ServerOptions::admit): the caller is authenticated from
  // the request's head, before its body is read, so that no one without a credential for this
  // map makes the sidecar hold a body. The operator's commands need the operator's token; the
  // forwarded messages and the channels that carry them, a peer token of this map
  // (RequestAuthorizer::admitPeer: whether its pod is registered yet is the route's to answer,
  // so a pod registered a moment ago gets a channel). While no token can be verified (the keys
  // not loaded) every caller is answered 503 unread; a path no route takes, 404. The routes
  // check again (a cached token costs a lookup): a channel's frames are not admitted one by one.
  std::optional<http::Response> admit(const http::Request& head);

 private:
  // Both by rvalue reference: the message passes through without a move per layer.
  void forwarded(http::Request&& request, http::Responder&& responder);
  // A forwarded message to `key`; `singleton`: by the singletons' route.
  void forwardedTo(EntityKey key, bool singleton, http::Request&& request,
                   http::Responder&& responder);
  // The answer to a forwarded message of `shard` that the registry delivered (or refused), and
  // in `result` how it went, for the metrics.
  http::Response deliveredAnswer(DeliveryOutcome&& o, ShardId shard, MessageResult& result);
  void ping(http::Request request, http::Responder responder);
  void assign(http::Request request, http::Responder responder);
  void unassign(http::Request request, http::Responder responder);
  // An assign or unassign that passed every check, with its shards listed.
  struct Command {
    protocol::ShardsRequest request;
    std::vector<ShardId> shards;
  };
  // What assign and unassign share: the caller, the map, the body and the target checked. The
  // request's answer is sent, and nullopt returned, when one fails.
  std::optional<Command> command(const http::Request& request, http::Responder& responder);
  // Nullopt when `target` is this sidecar, else the 409 WrongTarget answer.
  std::optional<http::Response> wrongTarget(const protocol::Target& target) const;

  Identity self_;
  EntityRegistry& registry_;
  RoutingTable& table_;
  RequestAuthorizer& authorizer_;
  SidecarMetrics& metrics_;
  const Clock& clock_;
  Logger log_;
  Options options_;
};

// The answer to a refused caller: 401 for Unauthenticated, 403 for PermissionDenied.
http::Response authorizationError(const Status& status);

}  // namespace kshard::sidecar
