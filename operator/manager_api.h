// ManagerApi: the Shard Manager's HTTP API on :7200 (DESIGN.md "Wire contracts"):
//
//   POST /v1/shardmaps/{namespace}/{name}/register          {"pod","uid","address","version"}
//   POST /v1/shardmaps/{namespace}/{name}/unregister        {"pod","uid"}
//   POST /v1/shardmaps/{namespace}/{name}/notify-unhealthy  {"pod"}
//   GET  /v1/shardmaps/{namespace}/{name}/assignments
//
// register, unregister and notify-unhealthy need the calling pod's projected service-account token
// (audience "kshard") as a bearer token when an authenticator is given: 401 Unauthenticated
// without a valid one, 403 Forbidden when it belongs to another pod (a pod registers and
// unregisters only itself) or to another namespace; each refusal is logged and recorded as a
// Warning Event on the ShardMap. GET assignments needs no token.
//
// Only the leader answers; a follower (or a replica whose lease lapsed) answers 503
// {"error": {"code": "NotLeader", ...}, "leader": "ip:port"}. Malformed input gets 400 naming the
// field; an unknown ShardMap 404 UnknownShardMap. Every answer is counted by verb and status.
#pragma once

#include <string_view>

#include "base/logger.h"
#include "http/server.h"
#include "operator/leadership.h"
#include "operator/operator_metrics.h"
#include "operator/pod_authenticator.h"
#include "operator/shard_manager.h"

namespace kshard::manager {

class ManagerApi {
 public:
  // `authenticator` null: callers are not authenticated (--pod-auth=none).
  ManagerApi(ShardManager& manager, Leadership& leadership, OperatorMetrics& metrics,
             Logger logger, PodAuthenticator* authenticator = nullptr);

  void addRoutes(http::Server& server);

  // The handler of one verb, exposed so tests can call it without a socket.
  void handle(std::string_view verb, http::Request request, http::Responder responder);

 private:
  ShardManager& manager_;
  Leadership& leadership_;
  OperatorMetrics& metrics_;
  Logger log_;
  PodAuthenticator* authenticator_;
};

}  // namespace kshard::manager
