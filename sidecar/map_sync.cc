#include "sidecar/map_sync.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kube/api_request.h"
#include "sharding/json_delta.h"
#include "sharding/shard_map_json.h"

namespace kshard::sidecar {

using nlohmann::json;

MapSync::MapSync(Identity self, MapApplier& applier, ManagerClient& manager, kube::Client* api,
                 Scheduler& scheduler, Logger logger, Options options)
    : self_(std::move(self)),
      applier_(applier),
      manager_(manager),
      api_(api),
      scheduler_(scheduler),
      log_(std::move(logger)),
      options_(options),
      backoff_(options.retryMin) {}

MapSync::~MapSync() { stop(); }

void MapSync::stop() {
  Scheduler::TaskId retry = 0;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    std::swap(retry, retry_);
  }
  if (retry != 0) scheduler_.cancel(retry);
  lifetime_.end();
}

MapSyncStats MapSync::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string MapSync::version() const {
  std::lock_guard lock(mu_);
  return held_;
}

void MapSync::announce(const std::string& resourceVersion) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    wanted_ = resourceVersion;
    ++announced_;
    if (busy_ || resourceVersion == held_) return;
    busy_ = true;
    readFor_ = announced_;
  }
  readChanges();
}

void MapSync::reapply() {
  std::string text;
  {
    std::lock_guard lock(mu_);
    if (stopped_ || heldText_.empty()) return;
    text = heldText_;
  }
  const json map = json::parse(text, nullptr, false);
  if (!map.is_discarded()) applier_.apply(map);
}

void MapSync::readChanges() {
  std::string since;
  std::string want;
  {
    std::lock_guard lock(mu_);
    since = held_;
    want = wanted_;
  }
  manager_.readChanges(since, want, options_.readTimeout,
                       lifetime_.guard([this, since](StatusOr<http::Response> answer) {
                         onChanges(since, std::move(answer));
                       }));
}

void MapSync::onChanges(const std::string& since, StatusOr<http::Response> answer) {
  if (!answer.ok()) return readObject("the manager did not answer: " + answer.status().toString());
  if (answer->status != 200) {
    return readObject("the manager answered " + std::to_string(answer->status));
  }
  const json body = json::parse(answer->body, nullptr, false);
  if (!body.is_object() || !body.contains("resourceVersion") || !body.contains("digest")) {
    return readObject("the manager's answer is not a ShardMapDelta");
  }
  std::string text;
  json map;
  if (body.contains("map")) {
    map = body["map"];
    text = map.dump();
  } else if (body.value("from", std::string()) == since && body.contains("changes")) {
    std::string base;
    {
      std::lock_guard lock(mu_);
      base = heldText_;
    }
    auto applied = sharding::applyJsonDelta(json::parse(base, nullptr, false), body["changes"]);
    if (!applied.ok()) return readObject("the changes do not fit: " + applied.status().message());
    map = std::move(*applied);
    text = map.dump();
  } else {
    return readObject("the manager's answer is from another version");
  }
  // Only the version the manager describes is taken: a copy that differs from it in any byte
  // (a base that was not what the manager had) is not.
  if (sharding::textDigest(text) != body["digest"].get<std::string>()) {
    return readObject("the result does not match the manager's digest");
  }
  {
    std::lock_guard lock(mu_);
    stats_.bytesManager += answer->body.size();
    ++(body.contains("map") ? stats_.wholeMaps : stats_.deltas);
  }
  if (!hold(map)) return readObject("the manager's map does not decode");
  std::string wanted;
  {
    std::lock_guard lock(mu_);
    wanted = wanted_;
  }
  if (!body.value("wantKnown", true) && body["resourceVersion"] != wanted) {
    return readObject("the manager has not seen the version the watch announced");
  }
  done();
}

void MapSync::readObject(const std::string& why) {
  if (api_ == nullptr) {
    log_.warn("cannot bring the ShardMap up to date", {{"reason", why}});
    return retryLater();
  }
  log_.debug("reading the ShardMap from the API server", {{"reason", why}});
  api_->callAsync(kube::getRequest(kube::resources::kShardMaps, self_.shardMap.ns, self_.shardMap.name),
                  lifetime_.guard([this](StatusOr<json> object) {
                    if (!object.ok()) {
                      log_.warn("cannot read the ShardMap from the API server",
                                {{"error", object.status().toString()}});
                      return retryLater();
                    }
                    {
                      std::lock_guard lock(mu_);
                      ++stats_.apiReads;
                      stats_.bytesApi += object->dump().size();
                    }
                    if (!hold(*object)) return retryLater();
                    done();
                  }));
}

bool MapSync::hold(const json& object) {
  auto map = sharding::shardMapFromJson(object);
  if (!map.ok()) {
    log_.error("ShardMap does not decode; keeping the previous view",
               {{"shard_map", self_.shardMap.toString()}, {"error", map.status().toString()}});
    return false;
  }
  // The canonical form: what the manager diffs against (operator/map_history.h).
  json canonical = sharding::toJson(*map);
  {
    std::lock_guard lock(mu_);
    held_ = map->metadata.resourceVersion;
    heldText_ = canonical.dump();
  }
  applier_.apply(canonical);
  return true;
}

void MapSync::done() {
  {
    std::lock_guard lock(mu_);
    backoff_ = options_.retryMin;
    if (stopped_ || readFor_ == announced_ || wanted_ == held_) {
      busy_ = false;
      return;
    }
    readFor_ = announced_;
  }
  readChanges();
}

void MapSync::retryLater() {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  const Duration wait = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.retryMax);
  retry_ = scheduler_.runAfter(wait, lifetime_.guard([this] {
    {
      std::lock_guard inner(mu_);
      retry_ = 0;
      readFor_ = announced_;
    }
    readChanges();
  }));
}

}  // namespace kshard::sidecar
