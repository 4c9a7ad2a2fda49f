// MapSync: brings this sidecar's view of the ShardMap to the version its watch announced, for
// the bytes of what changed (docs/architecture.md, "How sidecars learn the map").
//
// The watch (MapWatcher) carries only the object's metadata. For each new resourceVersion,
// MapSync asks the manager for the changes since the version it holds
// (ManagerClient::readChanges, operator/map_history.h), applies them to its copy of that version
// (sharding/json_delta.h), checks the result against the manager's digest, and hands the map to
// the MapApplier. It takes an answer only when it is the operator's (signed with the operator's
// token for this map's sidecars, checked like the operator's calls to the peer API), describes
// the announced version or one the manager stored after it, and does not go back in epoch.
// Whenever that is not so (no manager known, the manager down or not leading, an unsigned
// answer, a digest that does not match, a manager behind the watch), it reads the object from
// the API server instead (at least the announced version, from the API server's cache), as the
// sidecar did before deltas: the map keeps coming while the operator is down, and nothing but a
// version the API server stored is ever applied.
//
// One read at a time; announcements that arrive meanwhile are served by one more read. A read
// that fails everywhere is retried with backoff and jitter; a new announcement reads at once.
// Versions reach the applier one at a time, in the order they are held. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "kube/lifetime.h"
#include "sharding/shard_map_segments.h"
#include "sidecar/identity.h"
#include "sidecar/manager_client.h"
#include "sidecar/map_applier.h"
#include "sidecar/map_sync_stats.h"
#include "sidecar/request_authorizer.h"

namespace kshard::sidecar {


struct MapSyncOptions {
  Duration readTimeout = std::chrono::seconds(5);
  Duration retryMin = std::chrono::seconds(1);
  Duration retryMax = std::chrono::seconds(30);
};

class MapSync {
 public:
  using Options = MapSyncOptions;
  // `api` may be null (no API access): then only the manager is asked. `operatorCheck` proves
  // the manager's answers are the operator's (its authorizeManagerAnswer, on the answer's
  // Kshard-Manager-Authorization); null: not checked.
  MapSync(Identity self, MapApplier& applier, ManagerClient& manager, kube::Client* api,
          RequestAuthorizer* operatorCheck, Scheduler& scheduler, Random& random, Logger logger,
          Options options = {});
  ~MapSync();

  // The watch saw version `resourceVersion` of the object.
  void announce(const std::string& resourceVersion);
  // Applies the held version again (the watch's periodic resync), which repairs ownership if a
  // direct call from the operator was lost.
  void reapply();
  void stop();

  MapSyncStats stats() const;
  // The version held ("" before the first).
  std::string version() const;

 private:
  void readChanges();
  void onChanges(const std::string& since, const std::string& want,
                 StatusOr<http::Response> answer);
  void readObject(const std::string& why);
  // Reads one ShardMapSegment: from the API server's cache, and from etcd when the cache lags.
  sharding::SegmentFetch segmentFetch();
  void readFailed(const Status& error);
  void tookFromApi(const nlohmann::json& object, const std::string& want);
  // Why the manager's answer is not taken ("" when it is); fills `map` with the version it
  // describes, and `mapText` with its canonical text.
  std::string judge(const std::string& since, const http::Response& answer, nlohmann::json& map,
                    std::string& mapText);
  // Takes `map` (a whole map), read for announced version `covers`, as the held version and
  // applies it; false when it does not decode, or goes back in epoch (but for the API server's
  // answer for a ShardMap created again). `canonicalText`: its canonical text when known.
  bool hold(const nlohmann::json& map, bool fromApi, const std::string& covers,
            std::string canonicalText);
  // The read in progress is over: read again if the watch announced more meanwhile.
  void done();
  // The read in progress failed: read at once if a newer version was announced meanwhile,
  // otherwise after a backoff.
  void retryLater();
  void scheduleRetry();  // under mu_

  const Identity self_;
  MapApplier& applier_;
  ManagerClient& manager_;
  kube::Client* api_;
  RequestAuthorizer* operatorCheck_;
  Scheduler& scheduler_;
  Random& random_;  // under mu_
  Logger log_;
  const Options options_;

  std::mutex applyMu_;  // taken before mu_: one version at a time reaches the applier
  mutable std::mutex mu_;
  std::string held_;      // resourceVersion of the held copy
  std::string heldText_;  // its canonical JSON (sharding::toJson(...).dump())
  std::int64_t heldEpoch_ = 0;
  std::string heldUid_;
  std::string covered_;  // the announced version the held one was read for (it is not older)
  std::string wanted_;    // the last version the watch announced
  std::uint64_t announced_ = 0;  // announcements so far
  std::uint64_t readFor_ = 0;    // the announcement the read in progress serves
  bool busy_ = false;
  bool stopped_ = false;
  Duration backoff_{};
  Scheduler::TaskId retry_ = 0;
  std::uint64_t retryGeneration_ = 0;  // of the retry that may run
  MapSyncStats stats_;
  kube::Lifetime lifetime_;  // last: ended first
};

}  // namespace kshard::sidecar
