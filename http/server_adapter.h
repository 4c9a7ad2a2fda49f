// ServerAdapter: what the two Server adapters (BeastServer, CppRestServer) have in common.
//
// Each adapter keeps what its connections use in a core of its own, shared with them so that it
// outlives a call in flight; that core starts with a ServerCore: the options, the routes and the
// bound port. ServerAdapter holds the core and answers route() and port() from it, once for both;
// start() and stop() are each adapter's own.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "http/router.h"
#include "http/server.h"

namespace kshard::http {

struct ServerCore {
  explicit ServerCore(ServerOptions o) : options(std::move(o)), router(options.logger) {}

  const ServerOptions options;
  Router router;
  std::uint16_t port = 0;  // bound by start()
};

class ServerAdapter : public Server {
 public:
  ServerAdapter(const ServerAdapter&) = delete;
  ServerAdapter& operator=(const ServerAdapter&) = delete;

  using Server::route;
  void route(Method method, std::string_view pattern, Handler handler, RouteOptions options) final {
    core_->router.add(method, pattern, std::move(handler), options);
  }
  std::uint16_t port() const final { return core_->port; }

 protected:
  // `core` is the adapter's own core (a class derived from ServerCore).
  explicit ServerAdapter(std::shared_ptr<ServerCore> core) : core_(std::move(core)) {}

  // The adapter's core, as the type it made it.
  template <typename Core>
  Core& core() const {
    return static_cast<Core&>(*core_);
  }

 private:
  const std::shared_ptr<ServerCore> core_;
};

}  // namespace kshard::http
