// RestartableServer: an http::Server that can be replaced by a fresh one made the same way, for
// a TLS server whose certificate files changed (operator/certificate_watcher.h): a server reads
// its certificate when it starts, so serving a renewed one takes a new server.
//
//   RestartableServer webhook([&] { return makeWebhookServer(); }, logger);
//   webhook.start();
//   watcher: [&] { return webhook.restart().ok(); }
//
// restart() stops the running server (its requests in flight get `grace` to finish) and starts
// the next; the port is closed in between, for the few milliseconds that takes, so a client
// connecting then is refused (the API server's webhook calls are retried by their callers, e.g.
// a ReplicaSet creating a pod). A server that fails to start leaves none running; the next
// restart() makes one again. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "base/logger.h"
#include "base/status.h"
#include "http/server.h"

namespace kshard::manager {

class RestartableServer {
 public:
  // Makes a server with its routes, not started.
  using Factory = std::function<std::unique_ptr<http::Server>()>;

  RestartableServer(Factory factory, Logger logger,
                    std::chrono::milliseconds grace = std::chrono::seconds(1));
  ~RestartableServer();

  [[nodiscard]] Status start();
  [[nodiscard]] Status restart();
  void stop();
  // Servers started so far (for tests).
  int starts() const;

 private:
  Status startLocked();

  Factory factory_;
  Logger log_;
  const std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  std::unique_ptr<http::Server> server_;
  int starts_ = 0;
};

}  // namespace kshard::manager
