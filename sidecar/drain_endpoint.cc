#include "sidecar/drain_endpoint.h"

#include "protocol/wire.h"
#include "sidecar/sidecar_error.h"

namespace kshard::sidecar {
namespace {

// Compares in time independent of where the first difference is: the token is a secret.
bool sameSecret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

DrainEndpoint::DrainEndpoint(Drainer& drainer, Scheduler& scheduler, Logger logger,
                             Options options)
    : drainer_(drainer),
      scheduler_(scheduler),
      log_(std::move(logger)),
      options_(std::move(options)) {}

void DrainEndpoint::addRoutes(http::Server& server) {
  for (auto method : {http::Method::kGet, http::Method::kPost}) {
    server.route(method, "/v1/drain", [this](http::Request&& r, http::Responder&& res) {
      handle(std::move(r), std::move(res));
    });
  }
}

std::optional<http::Response> DrainEndpoint::refusal(const http::Request& request) const {
  const std::string ip = request.remoteAddress.substr(0, request.remoteAddress.rfind(':'));
  if (ip != "127.0.0.1" && ip != options_.hostIp && ip != options_.podIp) {
    return sidecarError(403, protocol::errors::kForbidden,
                        "the drain hook is for the kubelet of this pod's node");
  }
  if (!options_.token.empty() &&
      !sameSecret(request.headers.get(protocol::kDrainTokenHeader).value_or(""),
                  options_.token)) {
    return sidecarError(403, protocol::errors::kForbidden,
                        "the drain needs this pod's drain token (header " +
                            std::string(protocol::kDrainTokenHeader) + ")");
  }
  return std::nullopt;
}

void DrainEndpoint::handle(http::Request&& request, http::Responder&& responder) {
  if (auto refused = refusal(request)) {
    log_.warn("drain refused", {{"remote", request.remoteAddress}});
    responder.send(std::move(*refused));
    return;
  }
  auto shared = std::make_shared<http::Responder>(std::move(responder));
  drainer_.drain([this, shared](Status st) {
    const auto answer = [shared, st] {
      shared->send(st.ok() ? http::Response::json(200, R"({"drained":true})")
                           : sidecarError(500, protocol::errors::kDraining, st.message()));
    };
    if (!options_.appHook) {
      answer();
      return;
    }
    // The app's own hook, moved here by the injector: after the drain, before the SIGTERM.
    scheduler_.runAfter(Duration::zero(), [this, answer] {
      options_.appHook->run(options_.podIp, scheduler_, options_.hookTimeout,
                            [this, answer](Status hook) {
                              if (!hook.ok()) {
                                log_.warn("the app's own preStop hook failed",
                                          {{"error", hook.toString()}});
                              }
                              answer();
                            });
    });
  });
}

}  // namespace kshard::sidecar
