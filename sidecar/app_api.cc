#include "sidecar/app_api.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "sharding/shard_id.h"
#include "sidecar/entity_request.h"
#include "sidecar/sidecar_error.h"
#include "sidecar/singleton_keeper.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;
using nlohmann::json;

AppApi::AppApi(Identity self, Router& router, RoutingTable& table, EntityRegistry& registry,
               Drainer& drainer, Logger logger, Options options)
    : self_(std::move(self)),
      router_(router),
      table_(table),
      registry_(registry),
      drainer_(drainer),
      log_(std::move(logger)),
      options_(options) {}

void AppApi::addRoutes(http::Server& server) {
  // The shapes with an empty or missing type or id reach the same handler, whose check of the
  // key names what is missing (a 400, where the router alone would answer 404).
  for (const char* pattern : kEntityPatterns) {
    server.route(
        http::Method::kPost, std::string("/v1/entities") + pattern,
        [this](http::Request&& r, http::Responder&& res) { send(std::move(r), std::move(res)); });
  }
  for (const char* pattern : {"/v1/singletons/{name}", "/v1/singletons/"}) {
    server.route(http::Method::kPost, pattern, [this](http::Request&& r, http::Responder&& res) {
      sendToSingleton(std::move(r), std::move(res));
    });
  }
  server.route(http::Method::kPost, "/v1/drain", [this](http::Request r, http::Responder res) {
    drain(std::move(r), std::move(res));
  });
  server.route(http::Method::kGet, "/v1/shard-map", [this](http::Request r, http::Responder res) {
    shardMap(std::move(r), std::move(res));
  });
}

void AppApi::send(http::Request&& request, http::Responder&& responder) {
  EntityKey key = takeEntityKey(request);
  if (Status s = validateEntityKey(key, options_.maxIdBytes); !s.ok()) {
    responder.send(sidecarError(400, errors::kBadRequest, s.message()));
    return;
  }
  // Reserved, so that no entity of the app's shares a singleton's name and shard.
  if (key.type == kSingletonEntityType) {
    responder.send(sidecarError(400, errors::kBadRequest,
                                "entity type: " + std::string(kSingletonEntityType) +
                                    " is reserved for singletons (POST /v1/singletons/{name})"));
    return;
  }
  route(std::move(key), std::move(request), std::move(responder));
}

void AppApi::sendToSingleton(http::Request&& request, http::Responder&& responder) {
  std::string name;
  for (auto& [param, value] : request.params) {
    if (param == "name") name = std::move(value);
  }
  EntityKey key = singletonKey(std::move(name));
  if (Status s = validateEntityKey(key, options_.maxIdBytes); !s.ok()) {
    responder.send(sidecarError(400, errors::kBadRequest, "singleton name: " + s.message()));
    return;
  }
  const auto snapshot = table_.snapshot();
  const auto& declared = snapshot->spec.singletons;
  if (std::find(declared.begin(), declared.end(), key.id) == declared.end()) {
    responder.send(sidecarError(404, errors::kNotFound,
                                "no singleton " + key.id + " in the ShardMap's spec.singletons"));
    return;
  }
  route(std::move(key), std::move(request), std::move(responder));
}

void AppApi::route(EntityKey key, http::Request&& request, http::Responder&& responder) {
  Message m;
  m.key = std::move(key);
  const auto modeText = request.queryParam("mode");
  const auto mode = modeText ? parseMode(*modeText) : std::optional(DeliveryMode::kAsk);
  if (!mode) {
    responder.send(sidecarError(400, errors::kBadRequest, "query mode: must be ask or tell"));
    return;
  }
  const auto snapshot = table_.snapshot();
  if (snapshot->shardCount == 0) {
    responder.send(sidecarError(503, "NotReady", "this sidecar has not loaded its ShardMap yet"));
    return;
  }
  auto shard = sharding::shardIdOf(m.key.id, snapshot->shardCount);
  if (!shard.ok()) {
    responder.send(sidecarError(400, errors::kBadRequest, shard.status().message()));
    return;
  }
  m.shard = *shard;
  m.mode = *mode;
  m.headers = passThroughHeaders(std::move(request.headers));
  m.body = std::move(request.body);
  router_.send(
      std::move(m), snapshot->spec.sendTimeout,
      [res = std::move(responder)](http::Response&& r) mutable { res.send(std::move(r)); });
}

void AppApi::drain(http::Request, http::Responder responder) {
  auto res = std::make_shared<http::Responder>(std::move(responder));
  drainer_.drain([res](Status st) {
    if (st.ok()) {
      res->send(http::Response::json(200, R"({"drained":true})"));
    } else {
      res->send(sidecarError(500, errors::kDraining, st.message()));
    }
  });
}

void AppApi::shardMap(http::Request, http::Responder responder) {
  const auto snapshot = table_.snapshot();
  json pods = json::array();
  std::map<sharding::PodIndex, std::vector<ShardId>> byPod;
  for (ShardId s = 1; s <= snapshot->shardCount; ++s) {
    const auto p = snapshot->owners[static_cast<std::size_t>(s - 1)];
    if (p != sharding::kNoPod) byPod[p].push_back(s);
  }
  for (std::size_t i = 0; i < snapshot->pods.size(); ++i) {
    const auto& pod = snapshot->pods[i];
    const auto& shards = byPod[static_cast<sharding::PodIndex>(i)];
    pods.push_back({{"name", pod.pod},
                    {"address", pod.address},
                    {"shards", sharding::ShardSet::of(shards).toString()},
                    {"shardCount", shards.size()}});
  }
  json out = {
      {"shardMap", self_.shardMap.toString()},
      {"pod", self_.pod},
      {"shards", snapshot->shardCount},
      {"epoch", snapshot->epoch},
      {"manager", snapshot->manager ? json(snapshot->manager->address) : json(nullptr)},
      {"pods", pods},
      {"owned", sharding::ShardSet::of(registry_.ownedShards()).toString()},
      {"activeEntities", registry_.activeEntities()},
      {"draining", registry_.draining()},
  };
  responder.send(http::Response::json(200, out.dump()));
}

}  // namespace kshard::sidecar
