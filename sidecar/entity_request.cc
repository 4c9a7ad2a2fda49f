#include "sidecar/entity_request.h"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "base/utf8.h"
#include "http/message.h"
#include "protocol/wire.h"
#include "sidecar/app_host.h"

namespace kshard::sidecar {

Status validateEntityType(std::string_view type) {
  if (type.empty()) return invalidArgument("entity type: must not be empty");
  if (type.size() > kMaxEntityTypeBytes) {
    return invalidArgument("entity type: longer than " + std::to_string(kMaxEntityTypeBytes) +
                           " bytes");
  }
  if (Status s = validateUtf8(type); !s.ok()) return s.withContext("entity type");
  return {};
}

Status validateEntityKey(const EntityKey& key, std::size_t maxIdBytes) {
  if (Status s = validateEntityType(key.type); !s.ok()) return s;
  if (key.id.empty()) return invalidArgument("entity id: must not be empty");
  if (key.id.size() > maxIdBytes) {
    return invalidArgument("entity id: longer than " + std::to_string(maxIdBytes) + " bytes");
  }
  if (Status s = validateUtf8(key.id); !s.ok()) return s.withContext("entity id");
  return {};
}

EntityKey takeEntityKey(http::Request& request) {
  EntityKey key;
  for (auto& [name, value] : request.params) {
    if (name == "type") {
      key.type = std::move(value);
    } else if (name == "id") {
      key.id = std::move(value);
    }
  }
  return key;
}

std::optional<DeliveryMode> parseMode(std::string_view text) {
  if (text == "ask") return DeliveryMode::kAsk;
  if (text == "tell") return DeliveryMode::kTell;
  return std::nullopt;
}

std::string entityPath(std::string_view prefix, const EntityKey& key) {
  std::string path;
  path.reserve(prefix.size() + key.type.size() + key.id.size() + 8);
  path.append(prefix);
  http::appendPercentEncoded(path, key.type);
  path.push_back('/');
  http::appendPercentEncoded(path, key.id);
  return path;
}

bool staysOnItsHop(std::string_view name) {
  // Every field of every message comes through here: names that start with neither 'k' nor 'a'
  // are settled by the hop-by-hop switch alone, without a call to compare.
  const char first = static_cast<char>(name.empty() ? 0 : (name[0] | 0x20));
  return isHopByHopHeader(name) ||
         (first == 'k' && name.size() >= 7 &&
          http::equalsIgnoreCase(name.substr(0, 7), "kshard-")) ||
         (first == 'a' && http::equalsIgnoreCase(name, "authorization"));
}

http::Headers passThroughHeaders(http::Headers headers) {
  headers.removeIf(staysOnItsHop);
  return headers;
}

void addMessageFields(http::Headers& headers, ShardId shard, Epoch epoch, DeliveryMode mode) {
  // Filtered when the message was received, so the fields added here are the only Kshard-* ones.
  assert(std::none_of(headers.begin(), headers.end(),
                      [](const auto& field) { return staysOnItsHop(field.first); }));
  char number[24];
  const auto numberText = [&number](auto n) {
    return std::string_view(number, std::to_chars(number, number + sizeof number, n).ptr);
  };
  // Constant names and values formatted here: writable, no check needed.
  headers.addParsed(protocol::kShardHeader, numberText(shard));
  headers.addParsed(protocol::kEpochHeader, numberText(epoch));
  headers.addParsed(protocol::kModeHeader, mode == DeliveryMode::kTell ? "tell" : "ask");
}

}  // namespace kshard::sidecar
