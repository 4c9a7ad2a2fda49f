#include "operator/kube_shard_map_store.h"

#include <algorithm>
#include <utility>

#include "kube/api_request.h"
#include "operator/pod_directory.h"
#include "sharding/shard_map_json.h"

namespace kshard::manager {
namespace {

using nlohmann::json;
using sharding::SegmentRef;

// A ShardMap as the API answered it (whole again), decoded and validated.
StatusOr<sharding::ShardMap> decodeAnswer(StatusOr<json> answer, const std::string& what) {
  if (!answer.ok()) return answer.status().withContext(what);
  auto map = sharding::shardMapFromJson(*answer);
  if (!map.ok()) return map.status().withContext(what);
  return map;
}

std::string resourceVersionOf(const json& object) {
  return object.value("metadata", json::object()).value("resourceVersion", "");
}

std::string keyOf(const std::string& ns, const std::string& name) { return ns + "/" + name; }

bool namedIn(const std::vector<SegmentRef>& refs, const std::string& name) {
  return std::any_of(refs.begin(), refs.end(), [&](const SegmentRef& r) { return r.name == name; });
}

}  // namespace

KubeShardMapStore::KubeShardMapStore(kube::Client& api, Scheduler& scheduler, const Logger& log,
                                     sharding::SegmentLimits limits)
    : api_(api), scheduler_(scheduler), log_(log), limits_(limits) {}

KubeShardMapStore::~KubeShardMapStore() { lifetime_.end(); }

void KubeShardMapStore::load(const protocol::ShardMapRef& ref, Callback done) {
  const std::string what = "shardmap " + ref.toString();
  api_.callAsync(
      kube::getRequest(kShardMapResource, ref.ns, ref.name),
      lifetime_.guard([this, ref, what, done](StatusOr<json> object) {
        if (!object.ok()) return done(object.status().withContext(what));
        StatusOr<std::vector<SegmentRef>> named = sharding::segmentRefs(*object);
        if (!named.ok()) return done(named.status().withContext(what));
        const std::string version = resourceVersionOf(*object);
        auto fetch = [this, ns = ref.ns](const std::string& name,
                                         std::function<void(StatusOr<std::string>)> got) {
          api_.callAsync(kube::getRequest(kube::resources::kShardMapSegments, ns, name),
                         [got = std::move(got)](StatusOr<json> segment) {
                           if (!segment.ok()) return got(segment.status());
                           got(sharding::segmentData(*segment));
                         });
        };
        sharding::completeShardMap(
            std::move(*object), fetch,
            lifetime_.guard([this, ref, what, version, named = *named, done](StatusOr<json> whole) {
              if (whole.ok()) {
                remember(keyOf(ref.ns, ref.name), version, named, false);
                listOnce(ref.ns, ref.name);
              }
              done(decodeAnswer(std::move(whole), what));
            }));
      }));
}

void KubeShardMapStore::writeStatus(const sharding::ShardMap& map, Callback done) {
  const std::string& ns = map.metadata.namespace_;
  const std::string key = keyOf(ns, map.metadata.name);
  const std::string what = "shardmap " + key;
  std::vector<SegmentRef> reusable;
  {
    std::lock_guard lock(mu_);
    const Known& known = maps_[key];
    if (known.resourceVersion == map.metadata.resourceVersion) reusable = known.named;
  }
  StatusOr<sharding::SplitStatus> split =
      sharding::splitStatus(sharding::toJson(map), limits_, reusable);
  if (!split.ok()) return done(split.status().withContext(what));
  auto segments = std::make_shared<Segments>(std::move(split->segments));
  std::set<std::string> created;
  for (const sharding::Segment& s : *segments) {
    if (!namedIn(reusable, s.ref.name)) created.insert(s.ref.name);
  }
  Write write{ns, key, what, std::move(split->object), segments, created, std::move(done)};
  const json head = write.object;  // the segments' owner; `write` moves into the continuation
  createSegments(ns, head, segments, created,
                 lifetime_.guard([this, write = std::move(write)](Status made) mutable {
                   if (!made.ok()) return failed(write, made);
                   if (!write.segments->empty() && !schemaChecked(write.key)) {
                     return checkSchema(std::move(write));
                   }
                   put(std::move(write));
                 }));
}

// A write that failed may still have been stored (a timeout): its segments are garbage only
// once a later stored version does not name them.
void KubeShardMapStore::failed(const Write& w, const Status& error) {
  forget(w.key, w.created);
  w.done(error.withContext(w.what));
}

void KubeShardMapStore::put(Write w) {
  kube::WriteOptions options;
  options.subresource = "status";
  kube::ApiRequest request =
      kube::updateRequest(kShardMapResource, w.ns, std::move(w.object), options);
  api_.callAsync(std::move(request), lifetime_.guard([this, w = std::move(w)](StatusOr<json> stored) {
                   if (!stored.ok()) return failed(w, stored.status());
                   w.done(written(w.key, std::move(*stored), *w.segments, w.what));
                 }));
}

bool KubeShardMapStore::schemaChecked(const std::string& key) {
  std::lock_guard lock(mu_);
  return maps_[key].schemaChecked;
}

// A CRD installed before segments would prune status.segments from a status that has moved its
// pods out: readers would take it for a map without pods. The first segmented write of each map
// is tried as a dry run; when the API server drops the field, nothing is written.
void KubeShardMapStore::checkSchema(Write w) {
  kube::WriteOptions options;
  options.subresource = "status";
  options.dryRun = true;
  kube::ApiRequest request = kube::updateRequest(kShardMapResource, w.ns, w.object, options);
  api_.callAsync(
      std::move(request),
      lifetime_.guard([this, w = std::move(w)](StatusOr<json> tried) mutable {
        if (!tried.ok()) return failed(w, tried.status());
        const json& status = tried->value("status", json::object());
        if (status.value("segments", json()) != w.object["status"]["segments"]) {
          return failed(w, failedPrecondition(
                               "the API server drops status.segments: the installed ShardMap "
                               "CRD predates segmented statuses; apply the chart's crds/ "
                               "(kubectl apply --server-side -f charts/kshard/crds/)"));
        }
        {
          std::lock_guard lock(mu_);
          maps_[w.key].schemaChecked = true;
        }
        put(std::move(w));
      }));
}

StatusOr<sharding::ShardMap> KubeShardMapStore::written(const std::string& key, json stored,
                                                        const Segments& segments,
                                                        const std::string& what) {
  StatusOr<std::vector<SegmentRef>> named = sharding::segmentRefs(stored);
  if (!named.ok()) return named.status().withContext(what);
  if (named->size() != segments.size()) {
    // The CRD changed since the dry run: the stored stub fails closed (kSegmentedPod); check
    // again before the next write.
    std::lock_guard lock(mu_);
    maps_[key].schemaChecked = false;
    return failedPrecondition(what + ": the API server dropped status.segments; apply the chart's "
                                     "crds/ (kubectl apply --server-side -f charts/kshard/crds/)");
  }
  const std::string version = resourceVersionOf(stored);
  remember(key, version, *named, true);
  std::vector<std::string> data;
  data.reserve(segments.size());
  for (const sharding::Segment& s : segments) data.push_back(s.data);
  return decodeAnswer(sharding::assembleStatus(std::move(stored), data), what);
}

void KubeShardMapStore::createSegments(const std::string& ns, const json& map,
                                       std::shared_ptr<Segments> segments,
                                       const std::set<std::string>& create,
                                       std::function<void(Status)> done) {
  struct Gather {
    std::mutex mu;
    std::size_t left = 0;
    Status first;
    std::function<void(Status)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->left = create.size();
  gather->done = std::move(done);
  if (create.empty()) return gather->done({});
  for (const sharding::Segment& s : *segments) {
    if (create.count(s.ref.name) == 0) continue;
    createOne(ns, sharding::segmentObject(map, s), s.data, false, [gather](Status made) {
      std::unique_lock lock(gather->mu);
      if (!made.ok() && gather->first.ok()) gather->first = made;
      if (--gather->left > 0) return;
      lock.unlock();
      gather->done(gather->first);
    });
  }
}

// POST; an AlreadyExists is ours when its data is the same (a write retried against the same
// version), and is replaced once when it is not (someone else wrote it; readers would refuse it).
void KubeShardMapStore::createOne(const std::string& ns, json object, std::string data,
                                  bool replaced, std::function<void(Status)> done) {
  const std::string name = object["metadata"]["name"].get<std::string>();
  api_.callAsync(
      kube::createRequest(kube::resources::kShardMapSegments, ns, object),
      lifetime_.guard([this, ns, name, object, data, replaced, done](StatusOr<json> r) mutable {
        if (r.ok()) return done({});
        if (r.status().code() != StatusCode::kAlreadyExists) {
          return done(r.status().withContext("create ShardMapSegment " + name));
        }
        api_.callAsync(
            kube::getRequest(kube::resources::kShardMapSegments, ns, name),
            lifetime_.guard([this, ns, name, object, data, replaced,
                             done](StatusOr<json> found) mutable {
              if (!found.ok()) return done(found.status().withContext("ShardMapSegment " + name));
              StatusOr<std::string> theirs = sharding::segmentData(*found);
              if (theirs.ok() && *theirs == data) return done({});
              if (replaced) {
                return done(failedPrecondition("ShardMapSegment " + name +
                                               " is rewritten with other data as it is created"));
              }
              log_.warn("a ShardMapSegment of another content has this segment's name; replacing it",
                        {{"segment", ns + "/" + name}});
              kube::DeleteOptions options;
              options.preconditionUid =
                  found->value("metadata", json::object()).value("uid", "");
              api_.callAsync(
                  kube::deleteRequest(kube::resources::kShardMapSegments, ns, name, options),
                  lifetime_.guard([this, ns, object, data, done](StatusOr<json>) mutable {
                    createOne(ns, std::move(object), std::move(data), true, std::move(done));
                  }));
            }));
      }));
}

void KubeShardMapStore::remember(const std::string& key, const std::string& version,
                                 std::vector<SegmentRef> named, bool wrote) {
  std::set<std::string> dropped;
  {
    std::lock_guard lock(mu_);
    Known& known = maps_[key];
    const auto isNamed = [&](const std::string& name) { return namedIn(named, name); };
    if (wrote) {
      // Stored: whatever this replica knew of and the new version does not name is garbage
      // (what this write created, it names).
      for (const SegmentRef& r : known.named) dropped.insert(r.name);
      dropped.insert(known.unnamed.begin(), known.unnamed.end());
      std::erase_if(dropped, isNamed);
      known.unnamed.clear();
    } else {
      std::erase_if(known.unnamed, isNamed);
    }
    known.resourceVersion = version;
    known.named = std::move(named);
  }
  if (!dropped.empty()) collect(key, std::move(dropped));
}

// Nothing is reused after a failed write, and what it created waits for the next stored version.
void KubeShardMapStore::forget(const std::string& key, const std::set<std::string>& created) {
  std::lock_guard lock(mu_);
  Known& known = maps_[key];
  known.unnamed.insert(created.begin(), created.end());
  // The version this replica holds may not be the stored one any more: nothing is reused.
  known.resourceVersion.clear();
}

// Segments left by an earlier leader (a crash between creating and naming them): found once per
// map, and deleted with the garbage of this replica's next stored version.
void KubeShardMapStore::listOnce(const std::string& ns, const std::string& name) {
  const std::string key = keyOf(ns, name);
  {
    std::lock_guard lock(mu_);
    if (std::exchange(maps_[key].listed, true)) return;
  }
  kube::ListOptions options;
  options.labelSelector = std::string(kShardMapLabel) + "=" + name;
  options.metadataOnly = true;
  api_.callAsync(kube::listRequest(kube::resources::kShardMapSegments, ns, options),
                 lifetime_.guard([this, key](StatusOr<json> list) {
                   if (!list.ok()) {
                     std::lock_guard lock(mu_);
                     maps_[key].listed = false;  // again at the next load
                     return;
                   }
                   std::lock_guard lock(mu_);
                   Known& known = maps_[key];
                   for (const json& item : list->value("items", json::array())) {
                     const std::string segment =
                         item.value("metadata", json::object()).value("name", "");
                     if (!segment.empty() && !namedIn(known.named, segment)) {
                       known.unnamed.insert(segment);
                     }
                   }
                 }));
}

void KubeShardMapStore::collect(const std::string& key, std::set<std::string> names) {
  const std::string ns = key.substr(0, key.find('/'));
  scheduler_.runAfter(kSegmentGrace, lifetime_.guard([this, key, ns, names] {
    for (const std::string& name : names) {
      {
        std::lock_guard lock(mu_);
        if (namedIn(maps_[key].named, name)) continue;
      }
      api_.callAsync(kube::deleteRequest(kube::resources::kShardMapSegments, ns, name),
                     lifetime_.guard([this, key, ns, name](StatusOr<json> r) {
                       if (r.ok() || r.status().code() == StatusCode::kNotFound) return;
                       log_.warn("cannot delete an unused ShardMapSegment; trying again later",
                                 {{"segment", ns + "/" + name}, {"error", r.status().toString()}});
                       std::lock_guard lock(mu_);
                       maps_[key].unnamed.insert(name);
                     }));
    }
  }));
}

}  // namespace kshard::manager
