// Publication: one message published to a topic, as it travels from the publishing app through
// the sidecars to every pod of the ShardMap (sidecar/topic_publisher.h), and PodReceipt, what one
// pod made of it. With the validation of a topic's name and the wire forms both sides share: the
// peer API's path (POST /v1/peer/topics/{topic}[?entities={type}]) and its answer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "http/message.h"

namespace kshard::sidecar {

struct Publication {
  std::string topic;
  // ?entities={type}: delivered as a tell to each entity of this type active on the pod, instead
  // of to the app's topic callback.
  std::optional<std::string> entityType;
  std::string publisher;  // the pod whose app published it
  // Passed on to the app (content type and the like): only fields passThroughHeaders keeps.
  http::Headers headers;
  std::string body;
};

// What one pod made of a publication.
struct PodReceipt {
  bool accepted = false;
  // With an entity type: the entities that took it as a tell, and those that refused it (their
  // mailbox full, their shard handed off meanwhile).
  std::size_t entities = 0;
  std::size_t entitiesRefused = 0;
  // Not accepted: the error code (protocol::errors: Draining, LeaseFenced, AppUnavailable,
  // AppRefused, OutcomeUnknown, SendTimeout, PodLeft, ...) and what happened.
  std::string code;
  std::string message;

  static PodReceipt refused(std::string_view code, std::string message);
};

// A topic's name follows the rules of an entity type: not empty, at most kMaxEntityTypeBytes,
// valid UTF-8; and, since it travels in a header (Kshard-Topic), no control character, and, since
// it is a path segment of the app's callback, neither "." nor "..".
// InvalidArgument naming the problem ("topic: must not be empty").
[[nodiscard]] Status validateTopic(std::string_view topic);

// The route patterns, after the APIs' prefix ("/v1/topics", "/v1/peer/topics"), of a
// publication: the real one, and the shapes with an empty or missing topic, routed to the same
// handler so that validateTopic names the problem (400), not the router (404).
inline constexpr const char* kTopicPatterns[] = {"/{topic}", "/", ""};

// `prefix` (ending in '/') followed by the topic percent-encoded as one segment, and the entity
// type, if any, as the query: "/v1/peer/topics/news%2Fsport?entities=counter".
std::string topicPath(std::string_view prefix, const Publication& publication);

// The peer API's answer for a receipt: 200 {"pod", "entities", "entitiesRefused"} when accepted,
// else the sidecar error of its code (Kshard-Error set).
http::Response receiptAnswer(const PodReceipt& receipt, std::string_view pod);

// The receipt a publisher makes of a peer's answer, given the transport's outcome. Only kAnswered
// results are read here: the publisher decides what to do with the others (retry or not).
PodReceipt receiptOfAnswer(const http::Response& answer);

}  // namespace kshard::sidecar
