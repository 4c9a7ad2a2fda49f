// TopicDelivery: a topic's publication delivered on this pod, for the publisher's sidecar (this
// one, or another through the peer API): to the app's topic callback
// (POST /kshard/topics/{topic}), or, with an entity type, as a tell to each entity of that type
// active here at that moment (turn-based, through the EntityRegistry, so only while this pod owns
// the entity's shard).
//
// A pod that drains, or whose ownership lease has run out (fenced), takes nothing: it answers
// Draining or LeaseFenced, and the publisher counts it as not accepted.
#pragma once

#include <memory>

#include "base/status.h"
#include "base/unique_function.h"
#include "http/message.h"
#include "sidecar/entity_registry.h"
#include "sidecar/publication.h"

namespace kshard::sidecar {

// The app, as TopicDelivery sees it: its topic callback.
class TopicHost {
 public:
  virtual ~TopicHost() = default;
  // Calls the app's topic callback with `publication`, and `done` exactly once, from any thread,
  // with its answer or the transport's failure (Unavailable: surely not sent).
  virtual void deliverTopic(std::shared_ptr<const Publication> publication,
                            UniqueFunction<void(StatusOr<http::Response>&&)> done) = 0;
};

class TopicDelivery {
 public:
  using Done = UniqueFunction<void(PodReceipt&&)>;

  TopicDelivery(EntityRegistry& registry, TopicHost& host);

  // Delivers `publication` here and calls `done` exactly once with this pod's receipt: accepted
  // once the app answered 2xx (or, with an entity type, once the tells are queued), else the
  // refusal's code.
  void deliver(std::shared_ptr<const Publication> publication, Done done);

 private:
  void tellEntities(const Publication& publication, Done done);

  EntityRegistry& registry_;
  TopicHost& host_;
};

}  // namespace kshard::sidecar
