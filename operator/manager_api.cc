#include "operator/manager_api.h"

#include <functional>
#include <memory>
#include <string>

#include "kube/jwt.h"

namespace kshard::manager {
namespace {

constexpr std::string_view kRegister = "register";
constexpr std::string_view kUnregister = "unregister";
constexpr std::string_view kNotifyUnhealthy = "notify-unhealthy";
constexpr std::string_view kRenew = "renew";
constexpr std::string_view kAssignments = "assignments";

http::Response badRequest(const Status& s) {
  return http::Response::error(400, protocol::errors::kBadRequest, s.message());
}

}  // namespace

ManagerApi::ManagerApi(ShardManager& manager, Leadership& leadership, OperatorMetrics& metrics,
                       Logger logger, PodAuthenticator* authenticator)
    : manager_(manager),
      leadership_(leadership),
      metrics_(metrics),
      log_(std::move(logger)),
      authenticator_(authenticator) {}

void ManagerApi::addRoutes(http::Server& server) {
  const std::string base = "/v1/shardmaps/{namespace}/{name}/";
  for (std::string_view verb : {kRegister, kUnregister, kNotifyUnhealthy, kRenew}) {
    server.route(http::Method::kPost, base + std::string(verb),
                 [this, verb](http::Request r, http::Responder res) {
                   handle(verb, std::move(r), std::move(res));
                 });
  }
  server.route(http::Method::kGet, base + std::string(kAssignments),
               [this](http::Request r, http::Responder res) {
                 handle(kAssignments, std::move(r), std::move(res));
               });
}

void ManagerApi::handle(std::string_view verb, http::Request request, http::Responder responder) {
  // The reply may come later, from the controller's strand; it is counted when it goes out.
  auto shared = std::make_shared<http::Responder>(std::move(responder));
  Reply reply = [this, shared, verb = std::string(verb)](http::Response response) {
    metrics_.apiRequest(verb, response.status);
    shared->send(std::move(response));
  };
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
  if (verb == kAssignments) {
    controller->assignments(std::move(reply));
    return;
  }
  // Decode first (a malformed body is a 400 whoever sends it), then authenticate, then act.
  std::string pod;
  std::string uid;  // empty for notify-unhealthy: the caller reports another pod
  std::function<void()> act;
  if (verb == kRegister) {
    auto body = protocol::decodeRegisterRequest(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    pod = body->pod;
    uid = body->uid;
    act = [this, controller, reply, body = std::move(*body), ref = *ref,
           remote = request.remoteAddress]() mutable {
      log_.info("register", {{"shard_map", ref.toString()},
                             {"pod", body.pod},
                             {"uid", body.uid},
                             {"remote", remote}});
      controller->registerPod(std::move(body), std::move(reply));
    };
  } else if (verb == kUnregister) {
    auto body = protocol::decodeUnregisterRequest(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    pod = body->pod;
    uid = body->uid;
    act = [this, controller, reply, body = std::move(*body), ref = *ref]() mutable {
      log_.info("unregister", {{"shard_map", ref.toString()}, {"pod", body.pod}});
      controller->unregisterPod(std::move(body), std::move(reply));
    };
  } else if (verb == kRenew) {
    auto body = protocol::decodeTarget(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    pod = body->pod;
    uid = body->uid;
    act = [controller, reply, body = std::move(*body)]() mutable {
      controller->renew(std::move(body), std::move(reply));
    };
  } else {
    auto body = protocol::decodeNotifyUnhealthyRequest(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    act = [controller, reply, body = std::move(*body)]() mutable {
      controller->notifyUnhealthy(std::move(body), std::move(reply));
    };
  }
  if (authenticator_ == nullptr) {
    act();
    return;
  }
  auto refuse = [this, controller, reply, verb = std::string(verb), ref = *ref](
                    int status, std::string_view code, const std::string& message) {
    log_.warn("caller refused", {{"shard_map", ref.toString()},
                                 {"verb", verb},
                                 {"code", std::string(code)},
                                 {"reason", message}});
    controller->reportRefusedCaller(std::string(code), verb + " refused: " + message);
    reply(http::Response::error(status, code, message));
  };
  const std::string token(
      kube::bearerToken(request.headers.get(protocol::kAuthorizationHeader).value_or("")));
  if (token.empty()) {
    refuse(401, protocol::errors::kUnauthenticated,
           "no bearer token: " + std::string(verb) +
               " needs the pod's projected service-account token (audience \"" +
               kTokenAudience + "\", mounted by the sidecar injector)");
    return;
  }
  auto unavailable = [reply](const std::string& message) {
    reply(http::Response::error(503, "Unavailable",
                                "cannot authenticate the caller now; retry: " + message));
  };
  authenticator_->authenticate(
      token, [refuse, unavailable, act = std::move(act), ns = ref->ns, pod, uid,
              verb = std::string(verb)](StatusOr<PodIdentity> who) mutable {
        if (!who.ok()) {
          if (who.status().code() == StatusCode::kUnauthenticated) {
            refuse(401, protocol::errors::kUnauthenticated, who.status().message());
          } else {
            // Not a refusal of the caller (no Event): the API server could not be asked.
            unavailable(who.status().message());
          }
          return;
        }
        if (who->ns != ns) {
          refuse(403, protocol::errors::kForbidden,
                 "the token belongs to pod " + who->ns + "/" + who->pod +
                     ", outside the ShardMap's namespace " + ns);
          return;
        }
        if (!pod.empty() && (who->pod != pod || who->uid != uid)) {
          refuse(403, protocol::errors::kForbidden,
                 "the token belongs to pod " + who->ns + "/" + who->pod + " (uid " + who->uid +
                     "), not to pod " + ns + "/" + pod + " (uid " + uid + "): a pod may " + verb +
                     " only itself");
          return;
        }
        act();
      });
}

}  // namespace kshard::manager
