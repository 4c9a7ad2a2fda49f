// Registrar: brings this sidecar into its ShardMap, and back after it left it.
//
// At start-up, on a thread of its own:
//   1. waits until the ShardMap is loaded, the issuer keys are (when peers are authenticated:
//      the operator's calls follow the registration at once), and the app listens on its port;
//   2. asks the app to stop every entity it holds (AppHost::reset), again until it answers 2xx.
//      A sidecar that starts while its app runs (the sidecar's container alone restarted, after
//      an OOM kill) does not know which entities the app still holds: were it to register first,
//      a shard could leave this pod without those entities being stopped, and the app would keep
//      a stale copy of an entity another pod then runs;
//   3. registers (this incarnation) with the manager, retrying until it succeeds, and keeps the
//      ownership lease renewed (LeaseKeeper).
// registerAgain() repeats step 3 (after a drain that was undone, or a renew the manager refused):
// this process knows every entity it started, so no reset is needed then.
//
// Readiness (notReadyReason) stays false until step 3 first succeeded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/logger.h"
#include "sidecar/app_host.h"
#include "sidecar/lease_keeper.h"
#include "sidecar/manager_client.h"
#include "sidecar/map_applier.h"
#include "sidecar/token_authorizer.h"

namespace kshard::sidecar {

class Registrar {
 public:
  struct Options {
    int appPort = 8080;
    Duration appWaitTimeout = std::chrono::minutes(5);
    Duration resetTimeout = std::chrono::minutes(1);
  };
  // `issuerKeys` may be null (no peer authentication, or fixed keys).
  Registrar(MapApplier& applier, ApiServerIssuerKeys* issuerKeys, AppHost& app,
            ManagerClient& manager, LeaseKeeper& lease, Logger logger, Options options);
  ~Registrar();
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  void start();
  // Registers again (step 3 only); nothing when a registration is under way or the app's reset
  // (step 2) has not succeeded yet.
  void registerAgain();
  // Gives up waiting and retrying; joins the thread.
  void stop();

  bool registered() const { return registered_.load(); }
  // Empty once registered; otherwise what it waits for.
  std::string notReadyReason() const;

 private:
  void run();
  // Step 1; false when stopping or the app did not listen in time.
  bool waitForPrerequisites();
  // Step 2; false when stopping.
  bool resetApp();
  void registerPod();
  void setWaitingFor(std::string what);

  MapApplier& applier_;
  ApiServerIssuerKeys* issuerKeys_;
  AppHost& app_;
  ManagerClient& manager_;
  LeaseKeeper& lease_;
  Logger log_;
  const Options options_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> registered_{false};
  std::atomic<bool> registering_{false};
  std::atomic<bool> resetDone_{false};
  mutable std::mutex mu_;
  std::condition_variable wake_;  // stop() wakes the waits of steps 1 and 2
  std::string waitingFor_ = "ShardMap not loaded yet";
  std::thread thread_;
};

}  // namespace kshard::sidecar
