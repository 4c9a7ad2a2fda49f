#include "sidecar/map_sync.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kube/api_request.h"
#include "protocol/wire.h"
#include "sharding/json_delta.h"
#include "sharding/shard_map_json.h"
#include "sharding/shard_map_segments.h"

namespace kshard::sidecar {

using nlohmann::json;

MapSync::MapSync(Identity self, MapApplier& applier, ManagerClient& manager, kube::Client* api,
                 RequestAuthorizer* operatorCheck, Scheduler& scheduler, Random& random,
                 Logger logger, Options options)
    : self_(std::move(self)),
      applier_(applier),
      manager_(manager),
      api_(api),
      operatorCheck_(operatorCheck),
      scheduler_(scheduler),
      random_(random),
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
  Scheduler::TaskId waiting = 0;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    wanted_ = resourceVersion;
    ++announced_;
    // Held already, or older than what is held (an answer newer than it was taken).
    if (resourceVersion == held_ || resourceVersion == covered_) return;
    if (busy_ && retry_ == 0) return;  // the read in flight reads again when it ends
    // Idle, or waiting out a failure: a new version is read at once, with a fresh backoff
    // (the retry, should it be starting already, finds itself superseded).
    std::swap(waiting, retry_);
    ++retryGeneration_;
    busy_ = true;
    readFor_ = announced_;
    backoff_ = options_.retryMin;
  }
  if (waiting != 0) scheduler_.cancel(waiting);
  readChanges();
}

void MapSync::reapply() {
  std::lock_guard apply(applyMu_);
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
                       lifetime_.guard([this, since, want](StatusOr<http::Response> answer) {
                         onChanges(since, want, std::move(answer));
                       }));
}

std::string MapSync::judge(const std::string& since, const http::Response& answer, json& map,
                           std::string& mapText) {
  if (answer.status != 200) return "the manager answered " + std::to_string(answer.status);
  if (operatorCheck_ != nullptr) {
    http::Request signature;
    if (auto value = answer.headers.get(protocol::kManagerAuthorizationHeader)) {
      signature.headers.set(std::string(protocol::kAuthorizationHeader), std::string(*value));
    }
    if (Status s = operatorCheck_->authorizeManagerAnswer(signature); !s.ok()) {
      return "the answer is not the operator's: " + s.toString();
    }
  }
  const json body = json::parse(answer.body, nullptr, false);
  const auto text = [&](const char* key) {
    const auto it = body.is_object() ? body.find(key) : body.end();
    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto wantKnown = body.is_object() ? body.find("wantKnown") : body.end();
  if (text("resourceVersion").empty() || text("digest").empty() || wantKnown == body.end() ||
      !wantKnown->is_boolean()) {
    return "the manager's answer is not a ShardMapDelta";
  }
  {
    std::lock_guard lock(mu_);
    // Only the announced version, or one the manager stored after it.
    if (!wantKnown->get<bool>() && text("resourceVersion") != wanted_) {
      return "the manager has not seen the version the watch announced";
    }
  }
  if (body.contains("changes") && !text("from").empty() && text("from") == since) {
    std::string base;
    {
      std::lock_guard lock(mu_);
      base = heldText_;
    }
    auto applied = sharding::applyJsonDelta(json::parse(base, nullptr, false), body["changes"]);
    if (!applied.ok()) return "the changes do not fit: " + applied.status().message();
    map = std::move(*applied);
  } else {
    return "the manager holds no version this sidecar holds";
  }
  // Only the version the manager describes is taken: a copy that differs from it in any byte
  // (a base that was not what the manager had) is not.
  mapText = map.dump();
  if (sharding::textDigest(mapText) != text("digest")) {
    return "the result does not match the manager's digest";
  }
  std::lock_guard lock(mu_);
  stats_.bytesManager += answer.body.size();
  ++stats_.deltas;
  return {};
}

void MapSync::onChanges(const std::string& since, const std::string& want,
                        StatusOr<http::Response> answer) {
  if (!answer.ok()) return readObject("the manager did not answer: " + answer.status().toString());
  json map;
  std::string text;
  if (std::string why = judge(since, *answer, map, text); !why.empty()) return readObject(why);
  if (!hold(map, false, want, std::move(text))) {
    return readObject("the manager's map is not one to take");
  }
  done();
}

void MapSync::readObject(const std::string& why) {
  if (api_ == nullptr) {
    log_.warn("cannot bring the ShardMap up to date", {{"reason", why}});
    return retryLater();
  }
  log_.debug("reading the ShardMap from the API server", {{"reason", why}});
  kube::ApiRequest get =
      kube::getRequest(kube::resources::kShardMaps, self_.shardMap.ns, self_.shardMap.name);
  std::string want;
  {
    // At least the announced version, from the API server's cache rather than from etcd: when
    // every sidecar reads at once (the operator changed hands), the cache serves them.
    std::lock_guard lock(mu_);
    want = wanted_;
  }
  if (!want.empty()) get.query.emplace_back("resourceVersion", want);
  api_->callAsync(std::move(get), lifetime_.guard([this, want](StatusOr<json> object) {
                    if (!object.ok()) return readFailed(object.status());
                    // A large map's status is in segments, created before the status that names
                    // them: read from the cache too, and from etcd when the cache lags.
                    sharding::completeShardMap(std::move(*object), segmentFetch(),
                                               lifetime_.guard([this, want](StatusOr<json> whole) {
                                                 if (!whole.ok()) return readFailed(whole.status());
                                                 tookFromApi(*whole, want);
                                               }));
                  }));
}

sharding::SegmentFetch MapSync::segmentFetch() {
  // Captures no `this`: a fetch may complete after the MapSync is gone (its result is dropped by
  // the guarded completion), never after the client.
  return [api = api_, ns = self_.shardMap.ns](const std::string& name,
                                              std::function<void(StatusOr<std::string>)> got) {
    const auto request = [ns, name](bool fromCache) {
      kube::ApiRequest get = kube::getRequest(kube::resources::kShardMapSegments, ns, name);
      if (fromCache) get.query.emplace_back("resourceVersion", "0");
      return get;
    };
    api->callAsync(request(true), [api, request, got](StatusOr<json> segment) {
      if (segment.ok()) return got(sharding::segmentData(*segment));
      if (segment.status().code() != StatusCode::kNotFound) return got(segment.status());
      api->callAsync(request(false), [got](StatusOr<json> fresh) {
        if (!fresh.ok()) return got(fresh.status());
        got(sharding::segmentData(*fresh));
      });
    });
  };
}

void MapSync::readFailed(const Status& error) {
  log_.warn("cannot read the ShardMap from the API server", {{"error", error.toString()}});
  retryLater();
}

void MapSync::tookFromApi(const json& object, const std::string& want) {
  if (!hold(object, true, want, {})) return retryLater();
  {
    std::lock_guard lock(mu_);
    ++stats_.apiReads;
    stats_.bytesApi += heldText_.size();  // re-encoded: approximate
  }
  done();
}

bool MapSync::hold(const json& object, bool fromApi, const std::string& covers,
                   std::string canonicalText) {
  auto map = sharding::shardMapFromJson(object);
  if (!map.ok()) {
    log_.error("ShardMap does not decode; keeping the previous view",
               {{"shard_map", self_.shardMap.toString()}, {"error", map.status().toString()}});
    return false;
  }
  // The canonical form: what the manager diffs against (operator/map_history.h). A manager's
  // answer is in it already (its digest matched the manager's canonical text).
  if (canonicalText.empty()) canonicalText = sharding::toJson(*map).dump();
  std::lock_guard apply(applyMu_);
  {
    std::lock_guard lock(mu_);
    // Never back in epoch, from any source, but for a ShardMap deleted and created again (the
    // API server's answer, another uid).
    const bool sameObject = heldUid_ == map->metadata.uid;
    if (!held_.empty() && map->status.epoch < heldEpoch_ && (sameObject || !fromApi)) {
      return false;
    }
    held_ = map->metadata.resourceVersion;
    heldText_ = std::move(canonicalText);
    heldEpoch_ = map->status.epoch;
    heldUid_ = map->metadata.uid;
    covered_ = covers;
  }
  applier_.apply(*map);
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
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (readFor_ == announced_) return scheduleRetry();
    // A newer version was announced while this read failed: read it at once.
    readFor_ = announced_;
    backoff_ = options_.retryMin;
  }
  readChanges();
}

void MapSync::scheduleRetry() {
  // Full jitter: the sidecars of a map that failed together do not retry together.
  const Duration half = backoff_ / 2;
  const Duration wait =
      half + Duration(static_cast<Duration::rep>(
                 random_.uniform(static_cast<std::uint64_t>(half.count()) + 1)));
  backoff_ = std::min(backoff_ * 2, options_.retryMax);
  retry_ = scheduler_.runAfter(wait, lifetime_.guard([this, generation = ++retryGeneration_] {
    {
      std::lock_guard inner(mu_);
      if (generation != retryGeneration_) return;
      retry_ = 0;
      readFor_ = announced_;
    }
    readChanges();
  }));
}

}  // namespace kshard::sidecar
