// AppApi: the sidecar's API for its own app on 127.0.0.1 (DESIGN.md "App API"):
//   POST /v1/entities/{type}/{id}[?mode=tell]  send to an entity wherever it lives
//   POST /v1/singletons/{name}[?mode=tell]     send to a singleton of spec.singletons (the app
//                                              gets it as POST /kshard/singletons/{name})
//   POST /v1/drain                             stop entities and unregister (the preStop hook)
//   GET  /v1/shard-map                         this sidecar's cached view, for debugging
// (and POST /v1/topics/{topic}, in sidecar/topic_api.h)
#pragma once

#include <cstddef>

#include "base/logger.h"
#include "http/server.h"
#include "sidecar/drainer.h"
#include "sidecar/entity_registry.h"
#include "sidecar/identity.h"
#include "sidecar/router.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

class AppApi {
 public:
  struct Options {
    std::size_t maxIdBytes = 1024;
  };

  AppApi(Identity self, Router& router, RoutingTable& table, EntityRegistry& registry,
         Drainer& drainer, Logger logger, Options options);

  void addRoutes(http::Server& server);

 private:
  // Both by rvalue reference: the message passes through without a move per layer.
  void send(http::Request&& request, http::Responder&& responder);
  void sendToSingleton(http::Request&& request, http::Responder&& responder);
  // Routes the message to `key` (validated) that `request` carries to its shard's owner.
  void route(EntityKey key, http::Request&& request, http::Responder&& responder);
  void drain(http::Request request, http::Responder responder);
  void shardMap(http::Request request, http::Responder responder);

  Identity self_;
  Router& router_;
  RoutingTable& table_;
  EntityRegistry& registry_;
  Drainer& drainer_;
  Logger log_;
  Options options_;
};

}  // namespace kshard::sidecar
