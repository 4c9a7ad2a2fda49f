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

// InvalidArgument for a malformed baseUrl or unreadable TLS material.
StatusOr<std::unique_ptr<Client>> makeCppRestClient(ClientOptions options);

}  // namespace kshard::http
