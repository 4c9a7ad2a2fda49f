#include "http/admin_routes.h"

#include <utility>

namespace kshard::http {

namespace {

Response plainText(std::string body, std::string contentType) {
  Response r;
  r.headers.set("Content-Type", std::move(contentType));
  r.body = std::move(body);
  return r;
}

}  // namespace

void addAdminRoutes(Server& server, const metrics::Registry& registry, ReadinessCheck ready,
                    MetricsRefresh refresh) {
  server.route(Method::kGet, "/metrics",
               [&registry, refresh = std::move(refresh)](Request, Responder responder) {
                 if (refresh) refresh();
                 responder.send(
                     plainText(registry.exposition(), "text/plain; version=0.0.4; charset=utf-8"));
               });
  server.route(Method::kGet, "/healthz", [](Request, Responder responder) {
    responder.send(plainText("ok\n", "text/plain; charset=utf-8"));
  });
  server.route(Method::kGet, "/readyz", [ready = std::move(ready)](Request, Responder responder) {
    const std::string reason = ready ? ready() : std::string();
    if (reason.empty()) {
      responder.send(plainText("ok\n", "text/plain; charset=utf-8"));
    } else {
      responder.send(Response::error(503, "NotReady", reason));
    }
  });
}

}  // namespace kshard::http
