// BeastClient: the http::Client on Boost.Beast/Asio, for the data path (a sidecar forwarding to its
// peers and to its app), where throughput and latency matter. Also speaks TLS, with the same
// options as the cpprestsdk client (CA, client certificate, SNI, skip-verify).
//
// It owns `threads` I/O threads (ClientOptions::threads), or runs on a set it shares with servers
// and other clients (ClientOptions::ioThreads); callbacks run on them and must not block.
// Idle connections are pooled (up to maxConnections, each for at most idleTimeout; with shared
// threads of one loop per thread, up to maxConnections per thread, so that a request sent from
// one of them reuses a connection of its own thread). A connection the server closes while it is
// pooled leaves the pool: a plain one when its wait for readability fires, a TLS one when it is
// checked before reuse. Streams opened with openStream() must be destroyed
// before their client; destroying the client cancels them and fails requests in flight with
// Cancelled, and returns once their callbacks ran (except on one of the shared threads, which
// must go on to run them).
#pragma once

#include <memory>

#include "http/client.h"

namespace kshard::http {

// InvalidArgument for a malformed baseUrl or unreadable TLS material.
StatusOr<std::unique_ptr<Client>> makeBeastClient(ClientOptions options);

}  // namespace kshard::http
