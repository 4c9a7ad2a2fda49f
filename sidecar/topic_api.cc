#include "sidecar/topic_api.h"

#include <nlohmann/json.hpp>

#include "sidecar/entity_registry.h"
#include "sidecar/entity_request.h"
#include "sidecar/peer_api.h"
#include "sidecar/sidecar_error.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;
using nlohmann::json;

namespace {

// The publication a request names (its topic and entity type, validated), without its headers
// and body; or the 400 to answer.
StatusOr<Publication> publicationOf(http::Request& request) {
  Publication p;
  for (auto& [name, value] : request.params) {
    if (name == "topic") p.topic = std::move(value);
  }
  if (Status s = validateTopic(p.topic); !s.ok()) return s;
  if (const auto type = request.queryParam("entities")) {
    if (Status s = validateEntityType(*type); !s.ok()) return s.withContext("query entities");
    // Singletons take no tells from a topic: each has its own start and stop, and no type.
    if (*type == kSingletonEntityType) {
      return invalidArgument("query entities: " + std::string(kSingletonEntityType) +
                             " is reserved for singletons");
    }
    p.entityType = std::string(*type);
  }
  return p;
}

}  // namespace

std::string encodeSummary(const std::string& topic, const PublishSummary& summary) {
  json failed = json::array();
  for (const auto& f : summary.failed) {
    failed.push_back({{"pod", f.pod}, {"code", f.code}, {"message", f.message}});
  }
  return json{{"topic", topic},
              {"pods", summary.pods},
              {"accepted", summary.accepted},
              {"entities", summary.entities},
              {"entitiesRefused", summary.entitiesRefused},
              {"failed", std::move(failed)}}
      .dump();
}

TopicApi::TopicApi(Identity self, TopicPublisher& publisher, TopicDelivery& delivery,
                   RoutingTable& table, RequestAuthorizer& authorizer)
    : self_(std::move(self)),
      publisher_(publisher),
      delivery_(delivery),
      table_(table),
      authorizer_(authorizer) {}

void TopicApi::addAppRoutes(http::Server& server) {
  for (const char* pattern : kTopicPatterns) {
    server.route(http::Method::kPost, std::string("/v1/topics") + pattern,
                 [this](http::Request&& r, http::Responder&& res) {
                   publish(std::move(r), std::move(res));
                 });
  }
}

void TopicApi::addPeerRoutes(http::Server& server) {
  for (const char* pattern : kTopicPatterns) {
    server.route(http::Method::kPost, std::string("/v1/peer/topics") + pattern,
                 [this](http::Request&& r, http::Responder&& res) {
                   received(std::move(r), std::move(res));
                 });
  }
}

void TopicApi::publish(http::Request&& request, http::Responder&& responder) {
  auto p = publicationOf(request);
  if (!p.ok()) {
    responder.send(sidecarError(400, errors::kBadRequest, p.status().message()));
    return;
  }
  const auto snapshot = table_.snapshot();
  if (snapshot->shardCount == 0) {
    responder.send(sidecarError(503, "NotReady", "this sidecar has not loaded its ShardMap yet"));
    return;
  }
  p->publisher = self_.pod;
  p->headers = passThroughHeaders(std::move(request.headers));
  p->body = std::move(request.body);
  std::string topic = p->topic;
  publisher_.publish(
      std::move(*p), snapshot->spec.sendTimeout,
      [topic = std::move(topic), res = std::move(responder)](PublishSummary&& summary) mutable {
        res.send(http::Response::json(200, encodeSummary(topic, summary)));
      });
}

void TopicApi::received(http::Request&& request, http::Responder&& responder) {
  if (Status s = authorizer_.authorizePeer(request); !s.ok()) {
    responder.send(authorizationError(s));
    return;
  }
  auto p = publicationOf(request);
  if (!p.ok()) {
    responder.send(sidecarError(400, errors::kBadRequest, p.status().message()));
    return;
  }
  // Read before the Kshard-* fields are dropped with the rest of this hop's.
  if (const auto publisher = request.headers.get(protocol::kPublisherHeader)) {
    p->publisher = std::string(*publisher);
  }
  p->headers = passThroughHeaders(std::move(request.headers));
  p->body = std::move(request.body);
  delivery_.deliver(std::make_shared<const Publication>(std::move(*p)),
                    [pod = self_.pod, res = std::move(responder)](PodReceipt&& receipt) mutable {
                      res.send(receiptAnswer(receipt, pod));
                    });
}

}  // namespace kshard::sidecar
