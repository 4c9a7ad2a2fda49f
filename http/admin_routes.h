// Admin routes: GET /metrics, /healthz and /readyz, which both kshard binaries serve on their admin
// port (:7102 for the sidecar, :7202 for the operator) for Prometheus and the kubelet's probes.
#pragma once

#include <functional>
#include <string>

#include "http/server.h"
#include "metrics/metrics.h"

namespace kshard::http {

// Why the process is not ready; empty when it is.
using ReadinessCheck = std::function<std::string()>;

// Sets the metrics that are read, not counted, just before an exposition.
using MetricsRefresh = std::function<void()>;

// Registers on `server`:
//   GET /metrics  the registry's text exposition (text/plain; version=0.0.4), after `refresh`
//   GET /healthz  200 "ok" while the process can answer at all (liveness)
//   GET /readyz   200 "ok" when `ready` returns empty, else 503 with the reason as a JSON error
// `registry` must outlive the server; `ready` and `refresh` are called on a server thread and must
// not block.
void addAdminRoutes(Server& server, const metrics::Registry& registry, ReadinessCheck ready,
                    MetricsRefresh refresh = {});

}  // namespace kshard::http
