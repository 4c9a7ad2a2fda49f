// AppHost: the EntityHost that calls the app's entity callbacks over HTTP on 127.0.0.1:{appPort}
// (DESIGN.md "App callbacks"):
//   POST /kshard/entities/{type}/{id}       one message; any status and body go back unchanged
//   POST /kshard/entities/{type}/{id}/stop  2xx once the entity's state is safe
//   POST /kshard/entities/{type}/{id}/start 2xx once a kept-active entity runs (no message)
//   POST /kshard/singletons/{name}[/start|/stop]  the same three for a singleton (the entities
//                                           of type kSingletonEntityType)
//   POST /kshard/reset                      2xx once the app holds no entity (each stopped
//                                           and saved as by the stop callback)
//   POST /kshard/topics/{topic}             a topic's publication (sidecar/topic_delivery.h);
//                                           2xx once taken; carries Kshard-Topic and
//                                           Kshard-Publisher
// Messages carry Kshard-Shard, Kshard-Epoch (the fencing token) and Kshard-Mode, starts the first
// two; every callback carries Kshard-Incarnation, this sidecar process.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "http/client.h"
#include "sidecar/entity_registry.h"
#include "sidecar/topic_delivery.h"

namespace kshard::sidecar {

class AppHost final : public EntityHost, public TopicHost {
 public:
  // `client` points at the app's origin. `deliverTimeout` bounds one message at the app;
  // `stopTimeout` one stop call.
  AppHost(http::Client& client, Duration deliverTimeout, Duration stopTimeout,
          std::string incarnation = "");

  // When set, no call is sent to the app after the time it returns, and none is waited for past
  // it (the ownership lease's end: EntityRegistry::appDeadline). A call not sent fails
  // Unavailable; one cut at the deadline DeadlineExceeded (its outcome unknown).
  void setDeadline(std::function<SteadyTime()> deadline) { deadline_ = std::move(deadline); }

  void deliver(Message message, Epoch epoch,
               UniqueFunction<void(StatusOr<http::Response>&&)> done) override;
  void stop(const EntityKey& key, ShardId shard, std::uint64_t lastTurn,
            std::function<void(Status)> done) override;
  void start(const EntityKey& key, ShardId shard, Epoch epoch, std::uint64_t turn,
             StartCallback done) override;
  // Bounded like a message (deliverTimeout, the lease's deadline).
  void deliverTopic(std::shared_ptr<const Publication> publication,
                    UniqueFunction<void(StatusOr<http::Response>&&)> done) override;

  // Asks the app to stop every entity it holds: a sidecar that (re)starts does not know which
  // entities its app still runs from before, so it asks this before it takes any shard.
  // FailedPrecondition when the app does not implement the callback (404, 405, 501): such an
  // app cannot be served safely across a sidecar restart.
  void reset(Duration timeout, std::function<void(Status)> done);

 private:
  http::Client& client_;
  // The timeout of a call that may take `timeout`, cut at the deadline; nullopt when the
  // deadline has passed (the call must not be sent).
  std::optional<std::chrono::milliseconds> budget(Duration timeout) const;
  // A POST of the callback `target` that may take `timeout`, with `headers`; nullopt when the
  // deadline has passed (see budget).
  std::optional<http::Request> callback(std::string target, Duration timeout,
                                        http::Headers headers = {}) const;
  // Kshard-Incarnation, when this sidecar has one; after the message's own fields.
  void addIncarnation(http::Headers& headers) const;

  Duration deliverTimeout_;
  Duration stopTimeout_;
  std::string incarnation_;  // sent as Kshard-Incarnation, when set
  std::function<SteadyTime()> deadline_;
};

// The path of an entity callback: "/kshard/entities/{type}/{id}" with both parts percent-encoded,
// or "/kshard/singletons/{name}" for a singleton.
std::string entityCallbackPath(const EntityKey& key);
// The path of the topic callback: "/kshard/topics/{topic}", the topic percent-encoded.
std::string topicCallbackPath(std::string_view topic);

// True for headers that describe one hop (connection management, framing) and are not passed
// between the app, the sidecars and the caller.
bool isHopByHopHeader(std::string_view name);

}  // namespace kshard::sidecar
