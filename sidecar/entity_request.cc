#include "sidecar/entity_request.h"

#include <strings.h>

#include "base/utf8.h"
#include "sidecar/app_host.h"

namespace kshard::sidecar {

Status validateEntityKey(const EntityKey& key, std::size_t maxIdBytes) {
  if (key.type.empty()) return invalidArgument("entity type: must not be empty");
  if (key.type.size() > kMaxEntityTypeBytes) {
    return invalidArgument("entity type: longer than " + std::to_string(kMaxEntityTypeBytes) +
                           " bytes");
  }
  if (Status s = validateUtf8(key.type); !s.ok()) return s.withContext("entity type");
  if (key.id.empty()) return invalidArgument("entity id: must not be empty");
  if (key.id.size() > maxIdBytes) {
    return invalidArgument("entity id: longer than " + std::to_string(maxIdBytes) + " bytes");
  }
  if (Status s = validateUtf8(key.id); !s.ok()) return s.withContext("entity id");
  return {};
}

std::optional<DeliveryMode> parseMode(std::string_view text) {
  if (text == "ask") return DeliveryMode::kAsk;
  if (text == "tell") return DeliveryMode::kTell;
  return std::nullopt;
}

http::Headers passThroughHeaders(const http::Headers& headers) {
  http::Headers out;
  for (const auto& [name, value] : headers) {
    if (isHopByHopHeader(name)) continue;
    if (name.size() >= 7 && ::strncasecmp(name.c_str(), "kshard-", 7) == 0) continue;
    if (::strcasecmp(name.c_str(), "authorization") == 0) continue;
    out.add(name, value);
  }
  return out;
}

}  // namespace kshard::sidecar
