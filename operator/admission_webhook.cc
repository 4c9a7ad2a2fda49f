#include "operator/admission_webhook.h"

#include "protocol/json_limits.h"
#include "protocol/wire.h"

namespace kshard::manager {

void AdmissionWebhook::addRoutes(http::Server& server) const {
  server.route(
      http::Method::kPost, kPath,
      [this](http::Request request, http::Responder responder) {
        responder.send(handle(request.body));
      },
      http::RouteOptions{.maxBodyBytes = kMaxBodyBytes});
}

http::Response AdmissionWebhook::handle(std::string_view body) const {
  if (Status depth = protocol::checkJsonDepth(body); !depth.ok()) {
    return http::Response::error(400, protocol::errors::kBadRequest, depth.message());
  }
  SidecarInjector::Answer answer = injector_.review(body);
  return http::Response::json(answer.httpStatus, std::move(answer.body));
}

}  // namespace kshard::manager
