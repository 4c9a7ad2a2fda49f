#include "operator/restartable_server.h"

#include <utility>

namespace kshard::manager {

RestartableServer::RestartableServer(Factory factory, Logger logger,
                                     std::chrono::milliseconds grace)
    : factory_(std::move(factory)), log_(std::move(logger)), grace_(grace) {}

RestartableServer::~RestartableServer() { stop(); }

Status RestartableServer::start() {
  std::lock_guard lock(mu_);
  return startLocked();
}

Status RestartableServer::startLocked() {
  auto next = factory_();
  if (Status s = next->start(); !s.ok()) return s;
  server_ = std::move(next);
  ++starts_;
  return {};
}

Status RestartableServer::restart() {
  std::lock_guard lock(mu_);
  if (server_) server_->stop(grace_);
  server_.reset();
  Status s = startLocked();
  if (!s.ok()) log_.error("cannot start the server again", {{"error", s.toString()}});
  return s;
}

void RestartableServer::stop() {
  std::lock_guard lock(mu_);
  if (server_) server_->stop(grace_);
  server_.reset();
}

int RestartableServer::starts() const {
  std::lock_guard lock(mu_);
  return starts_;
}

}  // namespace kshard::manager
