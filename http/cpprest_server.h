// CppRestServer: the http::Server on cpprestsdk's http_listener, for the control plane (the
// operator's manager API and webhook). Prefer BeastServer on the data path.
//
// cpprestsdk's listener has gaps this adapter closes or documents:
//  - Port 0: the listener cannot report its port, so start() picks a free one by binding a
//    throw-away socket and then opens the listener on it. Another process may take the port in
//    between; start() then tries another (up to 10 times) before failing.
//  - Body limit: a Content-Length over maxBodyBytes (or the route's RouteOptions::maxBodyBytes)
//    is answered 413 before the body is read; a chunked body is counted as it arrives and
//    answered 413 once over. The connection is closed after a 413.
//  - Timeouts: a body not complete within requestTimeout is answered 408 and the connection closed.
//    cpprestsdk has no timeout for a peer that never sends its headers, or for idle keep-alive
//    connections: such connections stay open until they close or the server stops.
//  - Threads: handlers run on cpprestsdk's process-wide thread pool (ServerOptions::threads is not
//    used).
//  - remoteAddress is the peer's IP without the port (cpprestsdk does not expose the port).
//  - Stop races (in cpprestsdk, not closed here): stop() closes each open connection from the
//    calling thread while cpprestsdk's own threads may still act on it. A TLS client that
//    closes a keep-alive connection without a close_notify gets a 400 written by such a thread;
//    if stop() runs at that moment, both touch the socket at once (seen under UBSan in tests,
//    once in some hundreds to thousands of stops). stop() waits only for the requests it knows
//    of; a server that must not meet this uses Beast (the default).
// Streaming responses are supported (Responder::startStream).
#pragma once

#include "http/server_adapter.h"

namespace kshard::http {

class CppRestServer : public ServerAdapter {
 public:
  explicit CppRestServer(ServerOptions options);
  ~CppRestServer() override;

  Status start() override;
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0)) override;

  struct Impl;
};

}  // namespace kshard::http
