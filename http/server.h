// Http::Server: kshard's HTTP server interface.
//
// Routing is by method and path pattern ("/v1/entities/{type}/{id}"); captures match one path
// segment and are percent-decoded. Unknown paths get 404 and known paths with another method 405,
// both as JSON errors. Bodies over `maxBodyBytes` get 413 without the handler running.
//
// Handlers are asynchronous: they receive the request and a one-shot Responder which they may
// complete later, from any thread (the proxy path forwards and answers when the owner replies).
// A Responder destroyed without answering sends 500 so that a client is never left hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "http/message.h"

namespace kshard::http {

class Responder {
 public:
  using SendFn = std::function<void(Response)>;
  Responder() = default;
  explicit Responder(SendFn send);
  Responder(Responder&&) noexcept;
  Responder& operator=(Responder&&) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  // Answers the request. A second call is ignored.
  void send(Response response);
  bool sent() const { return send_ == nullptr; }

 private:
  SendFn send_;
};

using Handler = std::function<void(Request request, Responder responder)>;

struct TlsServerOptions {
  std::string certFile;  // PEM chain; re-read on restart only
  std::string keyFile;
};

struct ServerOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" for all interfaces
  std::uint16_t port = 0;          // 0 picks a free port; see Server::port()
  std::size_t maxBodyBytes = 4u << 20;
  // Longest time to receive one request's headers and body; also the keep-alive idle timeout.
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(30)};
  int threads = 2;
  std::optional<TlsServerOptions> tls;
};

class Server {
 public:
  virtual ~Server() = default;
  // Registers a route; call before start(). A later route with the same method and pattern wins.
  virtual void route(Method method, std::string_view pattern, Handler handler) = 0;
  // Binds and starts serving. An error when the address is taken or TLS files are unreadable.
  virtual Status start() = 0;
  // Stops accepting, closes idle connections, waits up to `grace` for handlers in flight.
  virtual void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0)) = 0;
  // The bound port (after start()).
  virtual std::uint16_t port() const = 0;
};

}  // namespace kshard::http
