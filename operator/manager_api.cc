#include "operator/manager_api.h"

#include <functional>
#include <memory>
#include <string>

#include "kube/jwt.h"
#include "protocol/json_limits.h"

namespace kshard::manager {
namespace {

constexpr std::string_view kRegister = "register";
constexpr std::string_view kUnregister = "unregister";
constexpr std::string_view kNotifyUnhealthy = "notify-unhealthy";
constexpr std::string_view kRenew = "renew";
constexpr std::string_view kAssignments = "assignments";
// The longest `since` or `want` of GET assignments (docs/openapi/manager.yaml).
constexpr std::size_t kMaxVersionBytes = 64;
// At most one log line and Event per map and refusal code in this time.
constexpr auto kRefusalReportInterval = std::chrono::seconds(5);

http::Response badRequest(const Status& s) {
  return http::Response::error(400, protocol::errors::kBadRequest, s.message());
}

// The read of changes GET assignments asks for with `since`; none for the whole map.
StatusOr<std::optional<ManagerApi::ChangesRead>> readQuery(const http::Request& request) {
  for (std::string_view key : {"since", "want"}) {
    if (request.queryParam(key).value_or("").size() > kMaxVersionBytes) {
      return invalidArgument(std::string(key) + ": longer than " +
                             std::to_string(kMaxVersionBytes) +
                             " bytes; a resourceVersion is far shorter");
    }
  }
  const auto since = request.queryParam("since");
  if (!since) return std::optional<ManagerApi::ChangesRead>();
  return std::optional<ManagerApi::ChangesRead>(ManagerApi::ChangesRead{
      std::string(*since), std::string(request.queryParam("want").value_or(""))});
}

}  // namespace

ManagerApi::ManagerApi(ShardManager& manager, Leadership& leadership, OperatorMetrics& metrics,
                       const Clock& clock, Logger logger, PodAuthenticator* authenticator)
    : manager_(manager),
      leadership_(leadership),
      metrics_(metrics),
      clock_(clock),
      log_(std::move(logger)),
      authenticator_(authenticator) {}

void ManagerApi::addRoutes(http::Server& server) {
  const std::string base = "/v1/shardmaps/{namespace}/{name}/";
  const http::RouteOptions bounded{.maxBodyBytes = kMaxBodyBytes};
  for (std::string_view verb : {kRegister, kUnregister, kNotifyUnhealthy, kRenew}) {
    server.route(
        http::Method::kPost, base + std::string(verb),
        [this, verb](http::Request r, http::Responder res) {
          handle(verb, std::move(r), std::move(res));
        },
        bounded);
  }
  server.route(
      http::Method::kGet, base + std::string(kAssignments),
      [this](http::Request r, http::Responder res) {
        handle(kAssignments, std::move(r), std::move(res));
      },
      bounded);
}

Reply ManagerApi::signedReply(const std::string& shardMap, Reply reply) const {
  if (!answerCredentials_) return reply;
  return [credentials = answerCredentials_, shardMap, reply](http::Response response) {
    if (response.status != 200) return reply(std::move(response));
    credentials(shardMap, [reply, response = std::move(response)](
                              StatusOr<std::string> authorization) mutable {
      if (!authorization.ok()) {
        // Unsigned, the sidecar would read the API server anyway: say why instead.
        return reply(http::Response::error(
            503, "Unavailable", "cannot sign the answer: " + authorization.status().message()));
      }
      if (!authorization->empty()) {
        response.headers.set(std::string(protocol::kManagerAuthorizationHeader),
                             std::move(*authorization));
      }
      reply(std::move(response));
    });
  };
}

Reply ManagerApi::counted(std::string_view verb, http::Responder responder) {
  // The reply may come later, from the controller's strand; it is counted when it goes out.
  auto shared = std::make_shared<http::Responder>(std::move(responder));
  return [this, shared, verb = std::string(verb)](http::Response response) {
    metrics_.apiRequest(verb, response.status);
    shared->send(std::move(response));
  };
}

void ManagerApi::handle(std::string_view verb, http::Request request, http::Responder responder) {
  Reply reply = counted(verb, std::move(responder));
  auto ref = protocol::parseShardMapRef(std::string(request.param("namespace")) + "/" +
                                        std::string(request.param("name")));
  if (!ref.ok()) {
    reply(badRequest(ref.status()));
    return;
  }
  // A renew is also answered for a while after this replica lost the Lease (the controller
  // decides: mayConfirmOwnership), so that pods keep serving through an API server outage.
  if (!leadership_.isLeader() && verb != kRenew) {
    reply(notLeaderResponse(manager_.leaderAddress(*ref)));
    return;
  }
  auto controller = manager_.find(*ref);
  if (controller == nullptr) {
    reply(http::Response::error(404, protocol::errors::kUnknownShardMap,
                                "no ShardMap " + ref->toString()));
    return;
  }
  StatusOr<std::optional<ChangesRead>> read =
      verb == kAssignments ? readQuery(request) : std::optional<ChangesRead>();
  if (!read.ok()) {
    reply(badRequest(read.status()));
    return;
  }
  if (authenticator_ == nullptr) {
    act(verb, {request.body, request.remoteAddress, *read}, std::move(controller), *ref,
        std::move(reply), nullptr);
    return;
  }
  // Authenticate first: nothing of the body is read for a caller without a valid token.
  const std::string token(
      kube::bearerToken(request.headers.get(protocol::kAuthorizationHeader).value_or("")));
  if (token.empty()) {
    refuse(controller, *ref, verb, reply, 401, protocol::errors::kUnauthenticated,
           "no bearer token: " + std::string(verb) +
               " needs the pod's projected service-account token (audience \"" + kTokenAudience +
               "\", mounted by the sidecar injector)");
    return;
  }
  authenticator_->authenticate(
      token, [this, token, controller = std::move(controller), ref = *ref,
              reply = std::move(reply), verb = std::string(verb),
              call = Call{std::move(request.body), std::move(request.remoteAddress), *read}](
                 StatusOr<PodIdentity> who) mutable {
        if (who.status().code() == StatusCode::kUnavailable &&
            (verb == kRenew || verb == kAssignments)) {
          // The API server cannot be asked: a renew, or a read of the map, goes on with what the
          // token itself proves (the pod it was bound to), so that pods keep their shards
          // through the outage. The controller grants a renew only to a pod its informer holds
          // and has not seen vanish (docs/decisions/0001-ownership-leases.md).
          if (auto local = authenticator_->verifyLocally(token); local.ok()) who = std::move(local);
        }
        if (!who.ok()) {
          if (who.status().code() == StatusCode::kUnauthenticated) {
            refuse(controller, ref, verb, reply, 401, protocol::errors::kUnauthenticated,
                   who.status().message());
          } else {
            // Not a refusal of the caller (no Event): the API server could not be asked.
            reply(http::Response::error(
                503, "Unavailable",
                "cannot authenticate the caller now; retry: " + who.status().message()));
          }
          return;
        }
        if (who->ns != ref.ns) {
          refuse(controller, ref, verb, reply, 403, protocol::errors::kForbidden,
                 "the token belongs to pod " + who->ns + "/" + who->pod +
                     ", outside the ShardMap's namespace " + ref.ns);
          return;
        }
        act(verb, call, std::move(controller), ref, std::move(reply), &*who);
      });
}

void ManagerApi::act(std::string_view verb, const Call& call,
                     std::shared_ptr<ShardMapController> controller,
                     const protocol::ShardMapRef& ref, Reply reply, const PodIdentity* caller) {
  const std::string& body = call.body;
  const std::string& remote = call.remote;
  if (verb == kAssignments) {
    // Any pod of the map's namespace may read it (the caller's namespace was checked).
    if (!call.read) {
      controller->assignments(std::move(reply));
    } else {
      // Signed only for a registered pod of this map: the signature is what the map's sidecars
      // take its changes on, and no one else gets one to show them.
      const bool member = caller != nullptr && controller->lists(caller->pod, caller->uid);
      controller->changes(call.read->since, call.read->want,
                          member ? signedReply(ref.toString(), std::move(reply)) : reply);
    }
    return;
  }
  if (Status depth = protocol::checkJsonDepth(body); !depth.ok()) {
    reply(badRequest(depth));
    return;
  }
  // A pod registers, unregisters and renews only itself.
  auto isNotCaller = [&](const std::string& pod, const std::string& uid) {
    if (caller == nullptr || (caller->pod == pod && caller->uid == uid)) return false;
    refuse(controller, ref, verb, reply, 403, protocol::errors::kForbidden,
           "the token belongs to pod " + caller->ns + "/" + caller->pod + " (uid " + caller->uid +
               "), not to pod " + ref.ns + "/" + pod + " (uid " + uid + "): a pod may " +
               std::string(verb) + " only itself");
    return true;
  };
  if (verb == kRegister) {
    auto request = protocol::decodeRegisterRequest(body);
    if (!request.ok()) return reply(badRequest(request.status()));
    if (isNotCaller(request->pod, request->uid)) return;
    log_.info("register", {{"shard_map", ref.toString()},
                           {"pod", request->pod},
                           {"uid", request->uid},
                           {"remote", remote}});
    controller->registerPod(std::move(*request), std::move(reply));
  } else if (verb == kUnregister) {
    auto request = protocol::decodeUnregisterRequest(body);
    if (!request.ok()) return reply(badRequest(request.status()));
    if (isNotCaller(request->pod, request->uid)) return;
    log_.info("unregister", {{"shard_map", ref.toString()}, {"pod", request->pod}});
    controller->unregisterPod(std::move(*request), std::move(reply));
  } else if (verb == kRenew) {
    auto request = protocol::decodeTarget(body);
    if (!request.ok()) return reply(badRequest(request.status()));
    if (isNotCaller(request->pod, request->uid)) return;
    controller->renew(std::move(*request), std::move(reply));
  } else {
    // The caller reports another pod: its namespace was checked, any pod of it may.
    auto request = protocol::decodeNotifyUnhealthyRequest(body);
    if (!request.ok()) return reply(badRequest(request.status()));
    controller->notifyUnhealthy(std::move(*request), std::move(reply));
  }
}

void ManagerApi::refuse(const std::shared_ptr<ShardMapController>& controller,
                        const protocol::ShardMapRef& ref, std::string_view verb, const Reply& reply,
                        int status, std::string_view code, const std::string& message) {
  std::uint64_t occurrences = 0;
  {
    std::lock_guard lock(refusalsMu_);
    auto it =
        refusals_.try_emplace(ref.toString() + " " + std::string(code), kRefusalReportInterval)
            .first;
    occurrences = it->second.occur(clock_.now());
  }
  if (occurrences > 0) {
    log_.warn("caller refused", {{"shard_map", ref.toString()},
                                 {"verb", std::string(verb)},
                                 {"code", std::string(code)},
                                 {"reason", message},
                                 {"occurrences", occurrences}});
    std::string note = std::string(verb) + " refused: " + message;
    if (occurrences > 1) note += " (and " + std::to_string(occurrences - 1) + " more since)";
    controller->reportRefusedCaller(std::string(code), std::move(note));
  }
  reply(http::Response::error(status, code, message));
}

}  // namespace kshard::manager
