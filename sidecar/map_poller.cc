#include "sidecar/map_poller.h"

#include <nlohmann/json.hpp>

#include "protocol/wire.h"

namespace kshard::sidecar {

MapPoller::MapPoller(std::unique_ptr<http::Client> manager, Scheduler& scheduler, Duration interval,
                     const Identity& self, MapApplier& applier, Logger logger,
                     std::function<std::string()> authorization)
    : manager_(std::move(manager)),
      scheduler_(scheduler),
      interval_(interval),
      target_("/v1/shardmaps/" + self.shardMap.ns + "/" + self.shardMap.name + "/assignments"),
      applier_(applier),
      log_(std::move(logger)),
      authorization_(std::move(authorization)) {}

MapPoller::~MapPoller() { stop(); }

void MapPoller::start() {
  running_->store(true);
  poll();
}

void MapPoller::stop() {
  running_->store(false);
  scheduler_.cancel(next_.load());
}

void MapPoller::scheduleNext() {
  if (!running_->load()) return;
  next_.store(scheduler_.runAfter(interval_, [this] { poll(); }));
}

void MapPoller::poll() {
  if (!running_->load()) return;
  http::Request req;
  req.method = http::Method::kGet;
  req.target = target_;
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(interval_ * 5);
  if (std::string value = authorization_ ? authorization_() : std::string(); !value.empty()) {
    req.headers.set(std::string(protocol::kAuthorizationHeader), std::move(value));
  }
  manager_->send(std::move(req), [this, running = running_](StatusOr<http::Response> r) {
    if (!running->load()) return;
    if (!r.ok() || r->status != 200) {
      log_.warn("fetching the ShardMap from the manager failed",
                {{"error", r.ok() ? std::to_string(r->status) : r.status().toString()}});
    } else {
      auto body = nlohmann::json::parse(r->body, nullptr, false);
      if (body.is_discarded()) {
        log_.warn("the manager's ShardMap is not JSON");
      } else {
        applier_.apply(body);
      }
    }
    scheduleNext();
  });
}

}  // namespace kshard::sidecar
