// TopicApi: the topic calls of the sidecar's two APIs (DESIGN.md "App API", "Peer API"):
//   app API   POST /v1/topics/{topic}[?entities={type}]       publish to every pod of the map
//   peer API  POST /v1/peer/topics/{topic}[?entities={type}]  one pod's delivery, for a publisher
//
// The app's publish is answered 200 with what the publish came to (sidecar/topic_publisher.h):
//   {"topic", "pods", "accepted", "entities", "entitiesRefused",
//    "failed": [{"pod", "code", "message"}]}
// A peer's delivery is answered as sidecar/publication.h's receiptAnswer says. The peer route
// authenticates its caller as a forwarded message's (RequestAuthorizer::authorizePeer); the peer
// server admitted it before reading the body (PeerApi::admit covers /v1/peer/).
#pragma once

#include <string>

#include "http/server.h"
#include "sidecar/identity.h"
#include "sidecar/publication.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/routing_table.h"
#include "sidecar/topic_delivery.h"
#include "sidecar/topic_publisher.h"

namespace kshard::sidecar {

class TopicApi {
 public:
  TopicApi(Identity self, TopicPublisher& publisher, TopicDelivery& delivery, RoutingTable& table,
           RequestAuthorizer& authorizer);

  void addAppRoutes(http::Server& server);
  void addPeerRoutes(http::Server& server);

 private:
  void publish(http::Request&& request, http::Responder&& responder);
  void received(http::Request&& request, http::Responder&& responder);

  Identity self_;
  TopicPublisher& publisher_;
  TopicDelivery& delivery_;
  RoutingTable& table_;
  RequestAuthorizer& authorizer_;
};

// The app's answer to a publish.
std::string encodeSummary(const std::string& topic, const PublishSummary& summary);

}  // namespace kshard::sidecar
