// AdmissionWebhook: the mutating webhook every operator replica serves on :9443 (TLS),
// `POST /mutate-pods` with an admission.k8s.io/v1 AdmissionReview, answered by
// SidecarInjector::review.
//
// What reaches it is whatever pod a user creates, relayed by the API server, and anything a
// client that reaches the port sends; with both replicas down no annotated pod can start
// (failurePolicy: Fail). So the body is bounded before it is read (kMaxBodyBytes: 413 from its
// Content-Length, as the API server's own limit on a request is 3 MiB) and its nesting before it
// is parsed (protocol::kMaxJsonDepth: 400), both refused without building a document.
#pragma once

#include <cstddef>
#include <string_view>

#include "http/server.h"
#include "operator/sidecar_injector.h"

namespace kshard::manager {

class AdmissionWebhook {
 public:
  static constexpr std::string_view kPath = "/mutate-pods";
  static constexpr std::size_t kMaxBodyBytes = 4u << 20;

  explicit AdmissionWebhook(const SidecarInjector& injector) : injector_(injector) {}

  void addRoutes(http::Server& server) const;
  // The answer to one request body (exposed so tests can call it without a socket).
  http::Response handle(std::string_view body) const;

 private:
  const SidecarInjector& injector_;
};

}  // namespace kshard::manager
