// Decoding of entity requests (the app API's send and the peer API's forwarded message) into a
// Message, with the validation every input from outside gets: type and id present, valid UTF-8,
// within their length limits.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "http/message.h"
#include "sidecar/entity_registry.h"

namespace kshard::sidecar {

inline constexpr std::size_t kMaxEntityTypeBytes = 253;
inline constexpr std::size_t kDefaultMaxEntityIdBytes = 1024;

// OK, or InvalidArgument naming the problem ("entity id: longer than 1024 bytes").
[[nodiscard]] Status validateEntityKey(const EntityKey& key, std::size_t maxIdBytes);
// The type's part of it: not empty, at most kMaxEntityTypeBytes, valid UTF-8.
[[nodiscard]] Status validateEntityType(std::string_view type);

// The route patterns, after the APIs' prefix ("/v1/entities", "/v1/peer/entities"), of a message
// to an entity: the real one, and the shapes with an empty or missing type or id, routed to the
// same handler so that validateEntityKey names the problem (400), not the router (404).
inline constexpr const char* kEntityPatterns[] = {"/{type}/{id}", "/{type}/", "/{type}", "//{id}",
                                                  "//"};

// The entity named by the route's {type} and {id} captures, moved out of `request` (an absent
// capture is empty). Not validated: see validateEntityKey.
EntityKey takeEntityKey(http::Request& request);

// "ask" | "tell"; nullopt for anything else.
std::optional<DeliveryMode> parseMode(std::string_view text);

// `prefix` (ending in '/') followed by the entity's type and id, each percent-encoded as one
// segment: "/kshard/entities/counter/a%2Fb".
std::string entityPath(std::string_view prefix, const EntityKey& key);

// True for the fields that do not travel with a message to the app: hop-by-hop headers, kshard's
// own Kshard-* headers and the caller's Authorization.
bool staysOnItsHop(std::string_view name);

// The headers of a request that travel with the message to the app (those !staysOnItsHop).
http::Headers passThroughHeaders(http::Headers headers);

// A message's headers (passThroughHeaders) with the Kshard-Shard, Kshard-Epoch and Kshard-Mode
// fields it carries to the owner's peer API or to the app appended: the only Kshard-* fields.
// The caller reserves room for kMessageFieldsBytes more, so that they do not move the rest.
void addMessageFields(http::Headers& headers, ShardId shard, Epoch epoch, DeliveryMode mode);
inline constexpr std::size_t kMessageFieldsBytes = 96;

}  // namespace kshard::sidecar
