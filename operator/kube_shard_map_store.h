// KubeShardMapStore: the ShardMap store on the Kubernetes API (REST with optimistic concurrency),
// with a status too large for one object kept in ShardMapSegments (sharding/shard_map_segments.h,
// docs/decisions/0018-segmented-status.md).
//
// One status write, for a large map:
//   1. split the status; segments of the version being replaced keep their names when their data
//      is unchanged, the others are created (POST; an AlreadyExists with other data is replaced);
//   2. PUT .../status with the resourceVersion read, naming the segments: the single commit
//      point, so a Conflict writes nothing that any reader would take (the first such write of
//      each map is tried as a dry run first: a CRD from before segments would prune them);
//   3. once it is stored, the segments no status names any more (the replaced version's, those of
//      failed writes, those found unnamed when the map was first read) are deleted after
//      kSegmentGrace, so that a reader of the previous version can still finish.
// A name dropped from a status is never named again (it comes from the resourceVersion it
// replaced), so deleting it cannot take away a segment that a later status needs.
//
// Thread-safe; callbacks run on the API client's threads.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/logger.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "kube/lifetime.h"
#include "kube/resource.h"
#include "operator/shard_map_store.h"
#include "sharding/shard_map_segments.h"

namespace kshard::manager {

// shardmaps.kshard.io/v1alpha1.
inline const kube::ResourceRef& kShardMapResource = kube::resources::kShardMaps;

class KubeShardMapStore final : public ShardMapStore {
 public:
  static constexpr Duration kSegmentGrace = std::chrono::seconds(30);

  KubeShardMapStore(kube::Client& api, Scheduler& scheduler, const Logger& log,
                    sharding::SegmentLimits limits = {});
  ~KubeShardMapStore() override;

  // A quorum GET of the ShardMap and of every segment it names.
  void load(const protocol::ShardMapRef& ref, Callback done) override;
  // PUT .../status with metadata.resourceVersion: the API server refuses a stale write (409).
  void writeStatus(const sharding::ShardMap& map, Callback done) override;

 private:
  // What this replica knows of one map's segments.
  struct Known {
    std::string resourceVersion;              // the last version read or written; "" = unsure
    std::vector<sharding::SegmentRef> named;  // the segments it names
    std::set<std::string> unnamed;            // created or found, named by no version known
    bool listed = false;                      // the map's segments were listed once
    bool schemaChecked = false;               // the CRD keeps status.segments (a dry run)
  };
  using Segments = std::vector<sharding::Segment>;

  void createSegments(const std::string& ns, const nlohmann::json& map,
                      std::shared_ptr<Segments> segments, const std::set<std::string>& create,
                      std::function<void(Status)> done);
  void createOne(const std::string& ns, nlohmann::json object, std::string data, bool replaced,
                 std::function<void(Status)> done);
  // One status write, once its segments exist.
  struct Write {
    std::string ns, key, what;
    nlohmann::json object;
    std::shared_ptr<Segments> segments;
    std::set<std::string> created;
    Callback done;
  };
  void put(Write w);
  void failed(const Write& w, const Status& error);
  bool schemaChecked(const std::string& key);
  void checkSchema(Write w);
  StatusOr<sharding::ShardMap> written(const std::string& key, nlohmann::json stored,
                                       const Segments& segments, const std::string& what);
  // Records the version read (`wrote` false) or stored, and collects what it makes garbage.
  void remember(const std::string& key, const std::string& version,
                std::vector<sharding::SegmentRef> named, bool wrote);
  void forget(const std::string& key, const std::set<std::string>& created);
  void listOnce(const std::string& ns, const std::string& name);
  // Deletes `names` after kSegmentGrace, unless this replica's latest version names them.
  void collect(const std::string& key, std::set<std::string> names);

  kube::Client& api_;
  Scheduler& scheduler_;
  Logger log_;
  const sharding::SegmentLimits limits_;
  std::mutex mu_;
  std::map<std::string, Known> maps_;  // "{ns}/{name}"
  kube::Lifetime lifetime_;            // every callback; ended first in the destructor
};

}  // namespace kshard::manager
