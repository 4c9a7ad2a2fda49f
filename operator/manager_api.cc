#include "operator/manager_api.h"

#include <memory>
#include <string>

namespace kshard::manager {
namespace {

constexpr std::string_view kRegister = "register";
constexpr std::string_view kUnregister = "unregister";
constexpr std::string_view kNotifyUnhealthy = "notify-unhealthy";
constexpr std::string_view kAssignments = "assignments";

http::Response badRequest(const Status& s) {
  return http::Response::error(400, protocol::errors::kBadRequest, s.message());
}

}  // namespace

ManagerApi::ManagerApi(ShardManager& manager, Leadership& leadership, OperatorMetrics& metrics,
                       Logger logger)
    : manager_(manager), leadership_(leadership), metrics_(metrics), log_(std::move(logger)) {}

void ManagerApi::addRoutes(http::Server& server) {
  const std::string base = "/v1/shardmaps/{namespace}/{name}/";
  for (std::string_view verb : {kRegister, kUnregister, kNotifyUnhealthy}) {
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
  if (!leadership_.isLeader()) {
    reply(notLeaderResponse(manager_.leaderAddress(*ref)));
    return;
  }
  auto controller = manager_.find(*ref);
  if (controller == nullptr) {
    reply(http::Response::error(404, protocol::errors::kUnknownShardMap,
                                "no ShardMap " + ref->toString()));
    return;
  }
  if (verb == kRegister) {
    auto body = protocol::decodeRegisterRequest(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    log_.info("register", {{"shard_map", ref->toString()},
                           {"pod", body->pod},
                           {"uid", body->uid},
                           {"remote", request.remoteAddress}});
    controller->registerPod(std::move(*body), std::move(reply));
  } else if (verb == kUnregister) {
    auto body = protocol::decodeUnregisterRequest(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    log_.info("unregister", {{"shard_map", ref->toString()}, {"pod", body->pod}});
    controller->unregisterPod(std::move(*body), std::move(reply));
  } else if (verb == kNotifyUnhealthy) {
    auto body = protocol::decodeNotifyUnhealthyRequest(request.body);
    if (!body.ok()) return reply(badRequest(body.status()));
    controller->notifyUnhealthy(std::move(*body), std::move(reply));
  } else {
    controller->assignments(std::move(reply));
  }
}

}  // namespace kshard::manager
