// Http::Server: kshard's HTTP server interface.
//
// Routing is by method and path pattern ("/v1/entities/{type}/{id}"); captures match one path
// segment and are percent-decoded (see http/router.h). Unknown paths get 404 and known paths with
// another method 405, both as JSON errors. Bodies over `maxBodyBytes` get 413 without the handler
// running.
//
// A route may take less than that (RouteOptions::maxBodyBytes): its requests are answered 413 from
// their Content-Length before the body is read, or as soon as a chunked body is over.
//
// Handlers are asynchronous: they receive the request and a one-shot Responder which they may
// complete later, from any thread (the proxy path forwards and answers when the owner replies).
// A Responder destroyed without answering sends 500 so that a client is never left hanging.
// Handlers run on a server thread and must not block it: long work belongs elsewhere, with the
// Responder moved along.
//
// A handler may instead stream its answer (a watch, a log tail): Responder::startStream sends the
// status and headers at once and returns a StreamWriter whose chunks go out as they are written
// (chunked transfer encoding).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/logger.h"
#include "base/status.h"
#include "base/unique_function.h"
#include "http/io_threads.h"
#include "http/message.h"

namespace kshard::http {

// The body of a streamed response. Every method may be called from any thread; chunks go out in
// the order written. Destroying a writer that was neither finished nor aborted finishes it.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Queues `chunk` (an empty chunk is ignored). False once the stream is finished, aborted or the
  // peer has gone; the chunk is then dropped.
  virtual bool write(std::string chunk) = 0;
  // Ends the body properly (the last chunk); the connection may carry further requests.
  virtual void finish() = 0;
  // Cuts the connection without ending the body: the client sees a truncated response, as when a
  // server dies mid-stream.
  virtual void abort() = 0;
};

// Where a Responder's answer goes: each server adapter implements it for its connections. The
// token tells the target which of its requests is answered (a late answer to a request the
// connection gave up on is dropped).
class ResponseTarget {
 public:
  virtual ~ResponseTarget() = default;
  virtual void respond(std::uint64_t token, Response&& response) = 0;
  virtual bool canStream() const { return false; }
  // Sends the status and headers; null when the connection ended before the stream started.
  // Called only when canStream().
  virtual std::unique_ptr<StreamWriter> startStream(std::uint64_t token, int status,
                                                    Headers headers);
};

class Responder {
 public:
  using SendFn = UniqueFunction<void(Response&&)>;
  using StartStreamFn = UniqueFunction<std::unique_ptr<StreamWriter>(int status, Headers headers)>;

  Responder() = default;
  // Answers request `token` of `target`. `keep` is held as long as the target and released after
  // it: what the target needs to outlive it (a server's I/O threads).
  Responder(std::shared_ptr<ResponseTarget> target, std::uint64_t token,
            std::shared_ptr<void> keep = nullptr);
  // Answers through functions: for servers (or tests) without a target of their own.
  // `startStream` is empty for those that cannot stream.
  explicit Responder(SendFn send, StartStreamFn startStream = nullptr);
  Responder(Responder&&) noexcept;
  Responder& operator=(Responder&&) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  // Answers 500 when the request was not answered.
  ~Responder() {
    if (target_ != nullptr) sendUnanswered();
  }

  // Answers the request. A second call is ignored.
  void send(Response response);
  // Answers with a streamed body instead. FailedPrecondition when the request was already answered
  // or the server cannot stream.
  StatusOr<std::unique_ptr<StreamWriter>> startStream(int status, Headers headers);
  bool sent() const { return target_ == nullptr; }

 private:
  void sendUnanswered();

  // Declared first, released last.
  std::shared_ptr<void> keep_;
  std::shared_ptr<ResponseTarget> target_;
  std::uint64_t token_ = 0;
};

// Both are handed on as rvalues: a handler may take them by value, or by rvalue reference to
// pass them along without a move per layer (the data path does).
using Handler = std::function<void(Request&& request, Responder&& responder)>;

// What a route may set for itself.
struct RouteOptions {
  // The largest body this route takes, at most the server's ServerOptions::maxBodyBytes (which
  // bounds every request, before its route is known); none: the server's. E.g. 16 KiB for an API
  // whose bodies are a few fields, on a server whose other routes take megabytes.
  std::optional<std::size_t> maxBodyBytes;
};

struct TlsServerOptions {
  std::string certFile;  // PEM chain; re-read on restart only
  std::string keyFile;
  // When set, clients must present a certificate that this CA bundle verifies (mutual TLS).
  std::string clientCaFile;
};

struct ServerOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" for all interfaces
  std::uint16_t port = 0;          // 0 picks a free port; see Server::port()
  std::size_t maxBodyBytes = 4u << 20;
  // Longest time to receive one request's headers and body; also the keep-alive idle timeout.
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(30)};
  // I/O threads of adapters that own theirs (Beast). cpprestsdk runs on its process-wide pool.
  int threads = 2;
  // When set, the Beast server runs on these threads, shared with other servers and clients,
  // instead of `threads` of its own; not owned, must outlive the server (see io_threads.h). Then
  // stop() must not be called from one of them. cpprestsdk ignores it.
  IoThreads* ioThreads = nullptr;
  std::optional<TlsServerOptions> tls;
  // Beast only: a client may ask for a kshard channel on any connection (http/channel.h) and
  // send its requests as frames, many at once, answered in any order. They reach the same routes.
  // cpprestsdk ignores it: its answer to the upgrade (404) sends the client back to plain HTTP.
  bool acceptChannels = false;
  // Beast only: what one channel may hold. Past either bound the server reads no further frame
  // from it until answers have gone out (back-pressure): requests dispatched and not answered,
  // and answers waiting to be written (the bound is checked before each frame is taken, so it may
  // be passed by the answers to the requests already in flight).
  std::size_t maxChannelRequestsInFlight = 1024;
  std::size_t maxChannelQueuedBytes = 4u << 20;
  // Beast only: connections open at once, in all and from one IP address (0: no bound). A
  // connection beyond either is closed as soon as it is accepted, before anything is read or
  // allocated for it. cpprestsdk cannot bound them (its listener accepts on its own).
  std::size_t maxConnections = 4096;
  std::size_t maxConnectionsPerPeer = 0;
  // Beast only: checked once a request's head is read, before its body is read or anything is
  // done for it, a channel's upgrade request included (the frames of an admitted channel are not
  // checked again: their requests reach the routes, which check what they need). A Response
  // refuses the request unread and ends the connection; none lets it on. For checks that need
  // no body, authentication first: a caller it refuses costs the server the head alone, never a
  // body of maxBodyBytes. The head has its method, target, headers and remoteAddress.
  // cpprestsdk ignores it (its routes still check every request, after its body).
  std::function<std::optional<Response>(const Request& head)> admit;
  // Where the adapter reports what it cannot answer to anyone (a handler that threw, a failed
  // write). None: such events are dropped silently.
  std::optional<Logger> logger;
};

class Server {
 public:
  virtual ~Server() = default;
  // Registers a route; call before start(). A later route with the same method and pattern wins.
  virtual void route(Method method, std::string_view pattern, Handler handler,
                     RouteOptions options) = 0;
  void route(Method method, std::string_view pattern, Handler handler) {
    route(method, pattern, std::move(handler), RouteOptions{});
  }
  // Binds and starts serving. An error when the address is taken or TLS files are unreadable.
  virtual Status start() = 0;
  // Stops accepting, closes idle connections, waits up to `grace` for handlers in flight.
  virtual void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0)) = 0;
  // The bound port (after start()).
  virtual std::uint16_t port() const = 0;
};

}  // namespace kshard::http
