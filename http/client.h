// Http::Client: kshard's HTTP client interface, for one origin ("http://10.1.0.7:7101").
//
// Connections are kept alive and reused. Every request has a deadline (the request's own timeout
// or the client's default); a transport failure or a timeout is a non-OK Status, while any HTTP
// status the server sent is an OK Response. Adapters never throw. The failures say whether the
// server may have acted on the request:
//   - Unavailable: it surely was not (no connection: refused, or not connected within
//     connectTimeout; a pooled connection found closed before writing). A caller may retry.
//   - OutcomeUnknown: the request went out, at least in part, and the exchange broke before
//     the answer. It may have been processed; retrying could apply it twice.
//   - DeadlineExceeded: it went out and no answer came in time (it may have been processed too).
//   - ResourceExhausted: the answer's body exceeded maxResponseBytes.
// cpprestsdk does not say whether a request was written: its adapter reports OutcomeUnknown for a
// failed POST or PATCH unless the connection was refused or unreachable.
//
// A request that failed on a reused keep-alive connection before any response byte arrived is
// retried once on a fresh connection only when its method is idempotent (GET, HEAD, PUT, DELETE,
// OPTIONS): a POST may have been processed, and retrying it is the caller's decision.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "base/unique_function.h"
#include "http/io_threads.h"
#include "http/message.h"

namespace kshard::http {

struct TlsClientOptions {
  // Server verification: a CA bundle as a file or PEM data; with neither, the system store.
  std::string caFile;
  std::string caData;
  bool insecureSkipVerify = false;
  std::string serverName;  // SNI and name checked; default: the origin's host
  // Client certificate (mutual TLS), as files or PEM data.
  std::string certFile;
  std::string certData;
  std::string keyFile;
  std::string keyData;
};

struct ClientOptions {
  std::string baseUrl;  // scheme://host:port, no path
  std::chrono::milliseconds connectTimeout{std::chrono::seconds(3)};
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(30)};
  std::size_t maxConnections = 32;           // idle connections kept open to the origin (see
                                             // ioThreads: per thread of a shared set)
  std::size_t maxResponseBytes = 64u << 20;  // larger bodies fail with ResourceExhausted
  // An idle pooled connection older than this is closed instead of reused: servers close idle
  // connections after their own timeout (ours: requestTimeout, nginx: 75 s), and reusing one the
  // server is closing fails the request.
  std::chrono::milliseconds idleTimeout{std::chrono::seconds(15)};
  std::string userAgent = "kshard";
  // I/O threads of adapters that own theirs (Beast). cpprestsdk runs on its process-wide pool.
  int threads = 1;
  // When set, the Beast client runs on these threads, shared with other servers and clients,
  // instead of `threads` of its own; not owned, must outlive the client (see io_threads.h). A
  // request sent from one of these threads uses a connection of that thread and its callback runs
  // there. cpprestsdk ignores it.
  IoThreads* ioThreads = nullptr;
  TlsClientOptions tls;
  // ChannelClient only: the Authorization header of each channel's upgrade request, asked for
  // when the channel opens (a renewed token goes out from the next one); none: no header. A
  // server that admits callers before it reads them (ServerOptions::admit) wants one.
  std::function<std::string()> channelAuthorization;
};

// A response whose body arrives over time (Kubernetes watches).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual int status() const = 0;
  virtual const Headers& headers() const = 0;
  // Blocks until some body bytes arrive, the body ends (an empty string), the stream fails
  // (non-OK), or `timeout` passes (DeadlineExceeded; the stream stays usable).
  virtual StatusOr<std::string> read(std::chrono::milliseconds timeout) = 0;
  // Aborts the stream from any thread; a blocked read() returns Cancelled.
  virtual void cancel() = 0;
};

// Move-only: a one-shot callback may own what it answers (a Responder).
using ResponseCallback = UniqueFunction<void(StatusOr<Response>&&)>;

class Client {
 public:
  virtual ~Client() = default;
  // Sends `request` (its target is the path and query) and calls `done` exactly once, on a
  // client thread, with the response or the transport error.
  virtual void send(Request request, ResponseCallback done) = 0;
  // Opens a streaming response; returns once the status and headers arrived (within the request's
  // deadline). The body then has no deadline: each read() has its own timeout. A stream's
  // connection is not shared with other requests.
  virtual StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request) = 0;

  // Blocking convenience over send(). Never call it on a client or server I/O thread: it waits
  // for work that thread would have to do.
  StatusOr<Response> sendSync(Request request);
};

}  // namespace kshard::http
