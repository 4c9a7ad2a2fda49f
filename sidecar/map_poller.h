// MapPoller: the alternative source of the sidecar's ShardMap, for environments where the
// sidecar cannot watch the API: it fetches the map from the operator's manager API
// (GET /v1/shardmaps/{ns}/{name}/assignments) every poll interval, with the pod's token for the
// manager API (the map lists the pods' addresses, which the operator shows only to its own pods).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "base/logger.h"
#include "base/scheduler.h"
#include "http/client.h"
#include "sidecar/identity.h"
#include "sidecar/map_applier.h"

namespace kshard::sidecar {

class MapPoller {
 public:
  // `authorization` gives the Authorization header of each poll ("" or null: none).
  MapPoller(std::unique_ptr<http::Client> manager, Scheduler& scheduler, Duration interval,
            const Identity& self, MapApplier& applier, Logger logger,
            std::function<std::string()> authorization = {});
  ~MapPoller();

  void start();
  // Stops polling; waits for nothing (a poll in flight finds the poller stopped).
  void stop();

 private:
  void poll();
  void scheduleNext();

  std::unique_ptr<http::Client> manager_;
  Scheduler& scheduler_;
  Duration interval_;
  std::string target_;
  MapApplier& applier_;
  Logger log_;
  std::function<std::string()> authorization_;
  std::shared_ptr<std::atomic<bool>> running_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<Scheduler::TaskId> next_{0};
};

}  // namespace kshard::sidecar
