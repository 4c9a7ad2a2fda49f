// MapPoller: the alternative source of the sidecar's ShardMap, for environments where the
// sidecar cannot watch the API: it fetches the map from the operator's manager API
// (GET /v1/shardmaps/{ns}/{name}/assignments) every poll interval.
#pragma once

#include <atomic>
#include <memory>

#include "base/logger.h"
#include "base/scheduler.h"
#include "http/client.h"
#include "sidecar/identity.h"
#include "sidecar/map_applier.h"

namespace kshard::sidecar {

class MapPoller {
 public:
  MapPoller(std::unique_ptr<http::Client> manager, Scheduler& scheduler, Duration interval,
            const Identity& self, MapApplier& applier, Logger logger);
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
  std::shared_ptr<std::atomic<bool>> running_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<Scheduler::TaskId> next_{0};
};

}  // namespace kshard::sidecar
