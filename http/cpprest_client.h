// CppRestClient: the http::Client on cpprestsdk's http_client, for the control plane (the kube
// client's REST calls and watches). Prefer BeastClient on the data path.
//
// What cpprestsdk decides and this adapter documents:
//  - Connections are pooled by cpprestsdk (maxConnections and idleTimeout are not applied; idle
//    connections are dropped after about 30 s) and work runs on its process-wide thread pool
//    (ClientOptions::threads is not used).
//  - The request deadline covers connecting too: connectTimeout is not enforced separately.
//  - TLS: the CA, client certificate and key go into cpprestsdk's ssl context; serverName is
//    sent as the Host header, which cpprestsdk also uses for SNI and certificate verification.
//  - Streams: body bytes are handed to read() as they arrive, without back-pressure (a reader
//    that falls behind lets memory grow).
#pragma once

#include <memory>

#include "http/client.h"

namespace kshard::http {

class CppRestClient : public Client {
 public:
  // InvalidArgument for a malformed baseUrl or unreadable TLS material.
  static StatusOr<std::unique_ptr<CppRestClient>> create(ClientOptions options);
  ~CppRestClient() override;
  CppRestClient(const CppRestClient&) = delete;
  CppRestClient& operator=(const CppRestClient&) = delete;

  void send(Request request, ResponseCallback done) override;
  StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request) override;

  struct Impl;

 private:
  explicit CppRestClient(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kshard::http
