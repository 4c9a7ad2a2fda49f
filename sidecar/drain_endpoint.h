// DrainEndpoint: GET and POST /v1/drain on the sidecar's admin port, which the injector makes the
// app container's preStop hook (the kubelet runs httpGet hooks from the node against the pod IP,
// so a loopback listener would not do).
//
// Who may drain: the caller must send the pod's drain token (Kshard-Drain-Token), a secret the
// injector puts in the hook and in the sidecar's environment (--drain-token; when none is set,
// none is required), and come from this pod, its node or loopback. Anyone else gets 403: a drain
// moves the pod's shards away.
//
// The answer comes once the drain is over and, when the injector moved the app's own preStop hook
// here (--app-prestop), once that hook has run too, so that the app's SIGTERM follows both.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/logger.h"
#include "base/scheduler.h"
#include "http/server.h"
#include "sidecar/drainer.h"
#include "sidecar/prestop_hook.h"

namespace kshard::sidecar {

class DrainEndpoint {
 public:
  struct Options {
    std::string podIp;
    std::string hostIp;
    std::string token;                  // empty: not required
    std::optional<PreStopHook> appHook;  // the app's own hook, run after the drain
    Duration hookTimeout = std::chrono::seconds(30);
  };

  DrainEndpoint(Drainer& drainer, Scheduler& scheduler, Logger logger, Options options);

  void addRoutes(http::Server& server);

 private:
  void handle(http::Request&& request, http::Responder&& responder);
  // The refusal for a caller that may not drain this pod, or nullopt.
  std::optional<http::Response> refusal(const http::Request& request) const;

  Drainer& drainer_;
  Scheduler& scheduler_;
  Logger log_;
  Options options_;
};

}  // namespace kshard::sidecar
