// kshard-sidecar: routes entity messages to the pod that owns their shard, and runs this pod's
// entities in its app (DESIGN.md "Flows"). See `kshard-sidecar --help`; the parts and their
// life are in sidecar/sidecar_server.h.
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "base/startup.h"
#include "sidecar/config.h"
#include "sidecar/sidecar_server.h"

namespace kshard::sidecar {
namespace {

// Hands the shards back and waits until that is over. A second signal meanwhile is only logged:
// the drain goes on (an exit now could drop accepted messages).
Status drainUntilDone(SidecarServer& server, StopSignals& signals, const Logger& log) {
  std::mutex mu;
  std::condition_variable cv;
  bool drained = false;
  Status result;
  signals.whileRunning(
      [&] {
        server.drain([&](Status st) {
          std::lock_guard lock(mu);
          result = std::move(st);
          drained = true;
          cv.notify_all();
        });
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return drained; });
      },
      [&](int sig) {
        log.warn("second signal ignored while draining", {{"signal", sig}});
      });
  return result;
}

int run(int argc, char** argv) {
  SidecarConfig cfg;
  OptionSet opts("kshard-sidecar",
                 "Routes entity messages to the pod that owns their shard and runs this pod's "
                 "entities in its app. Injected into annotated pods by kshard-operator.");
  cfg.declare(opts);
  if (auto exit = parseCommandLine(opts, argc, argv, [&] { return cfg.validate(); })) {
    return *exit;
  }
  Identity self = cfg.identity();
  self.incarnation = newIncarnation();
  const Logger log = loggerAtLevel("sidecar", cfg.logLevel)
                         .withFields({{"pod", self.pod}, {"shard_map", self.shardMap.toString()}});
  log.info("starting", {{"incarnation", self.incarnation}});

  // Before any thread starts: every thread inherits the blocked signals.
  StopSignals signals;
  auto server = SidecarServer::build(cfg, self, log);
  if (!server.ok()) {
    return server.status().code() == StatusCode::kInvalidArgument ? kExitConfig : kExitFailure;
  }
  if (!(*server)->start().ok()) return kExitFailure;

  const int sig = signals.wait();
  log.info("signal received, draining", {{"signal", sig}});
  const Status drained = drainUntilDone(**server, signals, log);
  (*server)->stop();
  log.info("stopped", {{"drain", drained.ok() ? "ok" : drained.toString()}});
  // Exit without unwinding the object graph: scheduler timers and client callbacks still refer
  // to its parts, and tearing it down buys nothing once the servers are closed.
  std::fflush(nullptr);
  ::_exit(drained.ok() ? kExitOk : kExitFailure);
}

}  // namespace
}  // namespace kshard::sidecar

int main(int argc, char** argv) { return kshard::sidecar::run(argc, argv); }
