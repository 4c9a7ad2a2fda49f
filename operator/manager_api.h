// ManagerApi: the Shard Manager's HTTP API on :7200 (DESIGN.md "Wire contracts"):
//
//   POST /v1/shardmaps/{namespace}/{name}/register          {"pod","uid","address","version"}
//   POST /v1/shardmaps/{namespace}/{name}/unregister        {"pod","uid"}
//   POST /v1/shardmaps/{namespace}/{name}/notify-unhealthy  {"pod"}
//   POST /v1/shardmaps/{namespace}/{name}/renew             {"pod","uid"}
//   GET  /v1/shardmaps/{namespace}/{name}/assignments
//
// register, unregister, notify-unhealthy and renew need the calling pod's projected
// service-account token (audience "kshard.io/operator") as a bearer token when an authenticator is given:
// 401 Unauthenticated without a valid one, 403 Forbidden when it belongs to another pod (a pod
// registers, unregisters and renews only itself) or to another namespace. Refusals are logged and
// recorded as a Warning Event on the ShardMap, at most once per 5 s for each map and code (with how
// many they stand for), so that a flood of bogus calls costs neither the log nor the controllers'
// strand. GET assignments needs no token.
//
// Bounded before authenticated: bodies are at most kMaxBodyBytes (413 from the Content-Length,
// before they are read); the caller is authenticated (PodAuthenticator: its token verified
// locally, then a TokenReview) before its body is parsed, and the body's nesting is checked
// before that (protocol/json_limits.h).
//
// Only the leader answers; a follower (or a replica whose lease lapsed) answers 503
// {"error": {"code": "NotLeader", ...}, "leader": "ip:port"}. Malformed input gets 400 naming the
// field; an unknown ShardMap 404 UnknownShardMap. Every answer is counted by verb and status.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/log_throttle.h"
#include "base/logger.h"
#include "http/server.h"
#include "operator/leadership.h"
#include "operator/operator_metrics.h"
#include "operator/pod_authenticator.h"
#include "operator/shard_manager.h"

namespace kshard::manager {

class ManagerApi {
 public:
  // The largest body any verb takes: its fields are a few names and an address.
  static constexpr std::size_t kMaxBodyBytes = 16 * 1024;

  // `authenticator` null: callers are not authenticated (--pod-auth=none).
  ManagerApi(ShardManager& manager, Leadership& leadership, OperatorMetrics& metrics,
             const Clock& clock, Logger logger, PodAuthenticator* authenticator = nullptr);

  void addRoutes(http::Server& server);

  // How the answers sidecars act on are signed: `done` gets the Authorization value of the
  // operator's token for the audience of the map's answers (protocol::mapAnswerAudience; "" for
  // none), as HttpPodClient::Credentials. The answer to a read of changes by a registered pod of
  // the map (authenticated) carries it in Kshard-Manager-Authorization; any other answer, and
  // every answer without credentials (--sidecar-auth=none) or without authentication
  // (--pod-auth=none), is unsigned. Before addRoutes.
  using AnswerCredentials = std::function<void(const std::string& shardMap,
                                               std::function<void(StatusOr<std::string>)> done)>;
  void setAnswerCredentials(AnswerCredentials credentials) {
    answerCredentials_ = std::move(credentials);
  }

  // The handler of one verb, exposed so tests can call it without a socket.
  void handle(std::string_view verb, http::Request request, http::Responder responder);

  // GET assignments?since=&want=: a read of the map's changes.
  struct ChangesRead {
    std::string since;
    std::string want;
  };

 private:
  // What act needs of a request: its body, its sender, and for GET assignments its query.
  struct Call {
    std::string body;
    std::string remote;
    std::optional<ChangesRead> read;
  };
  // Decodes the body of an authenticated (or unauthenticated, without an authenticator) call
  // and hands it to the controller; `caller` null without an authenticator.
  void act(std::string_view verb, const Call& call, std::shared_ptr<ShardMapController> controller,
           const protocol::ShardMapRef& ref, Reply reply, const PodIdentity* caller);
  // `reply` with the answer signed for the sidecars of `shardMap` (setAnswerCredentials).
  Reply signedReply(const std::string& shardMap, Reply reply) const;
  // A reply to `responder` that counts the answer by verb and status.
  Reply counted(std::string_view verb, http::Responder responder);
  // Answers `status` with `code`; logs and records a Warning Event (throttled).
  void refuse(const std::shared_ptr<ShardMapController>& controller,
              const protocol::ShardMapRef& ref, std::string_view verb, const Reply& reply,
              int status, std::string_view code, const std::string& message);

  ShardManager& manager_;
  Leadership& leadership_;
  OperatorMetrics& metrics_;
  const Clock& clock_;
  Logger log_;
  PodAuthenticator* authenticator_;
  AnswerCredentials answerCredentials_;
  std::mutex refusalsMu_;
  std::map<std::string, LogThrottle> refusals_;  // "<ns>/<name> <code>"
};

}  // namespace kshard::manager
