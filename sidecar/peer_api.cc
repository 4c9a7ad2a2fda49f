#include "sidecar/peer_api.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "http/channel.h"
#include "sharding/shard_id.h"
#include "sidecar/app_host.h"
#include "sidecar/entity_request.h"
#include "sidecar/shard_load.h"
#include "sidecar/sidecar_error.h"
#include "sidecar/singleton_keeper.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;
using nlohmann::json;

namespace {

template <typename T>
bool parseNumber(std::string_view text, T& out) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

http::Response badRequest(std::string_view message) {
  return sidecarError(400, errors::kBadRequest, message);
}

http::Response notReady() {
  return sidecarError(503, "NotReady", "this sidecar has not loaded its ShardMap yet");
}

// Reads what routes a forwarded message into `m`, whose key is read: its shard (Kshard-Shard,
// which must be the entity's among `shardCount` shards) and its mode (Kshard-Mode, ask when
// absent). Drops every field that stays on its hop. The answer to send instead, when either is
// missing or wrong.
std::optional<http::Response> takeRouting(http::Headers& headers, std::int32_t shardCount,
                                          Message& m) {
  // One pass over the fields: the first Kshard-Shard and Kshard-Mode are read, and every field
  // that stays on its hop is dropped, the Kshard-* ones included.
  std::optional<std::string> shardHeader;
  std::optional<std::string> modeHeader;
  headers.removeIf([&](std::string_view name, std::string_view value) {
    if (!staysOnItsHop(name)) return false;
    if (!shardHeader && http::equalsIgnoreCase(name, protocol::kShardHeader)) {
      shardHeader.emplace(value);
    } else if (!modeHeader && http::equalsIgnoreCase(name, protocol::kModeHeader)) {
      modeHeader.emplace(value);
    }
    return true;
  });
  if (!shardHeader || !parseNumber(*shardHeader, m.shard)) {
    return badRequest("header Kshard-Shard: required, a shard number");
  }
  // A sender with another shard count (a stale or foreign map) would compute other shards:
  // refuse rather than run an entity under the wrong shard.
  const auto expected = sharding::shardIdOf(m.key.id, shardCount);
  if (!expected.ok() || *expected != m.shard) {
    return badRequest("header Kshard-Shard: " + *shardHeader +
                      " is not the shard of this entity id among " + std::to_string(shardCount) +
                      " shards");
  }
  const auto mode = modeHeader ? parseMode(*modeHeader) : std::optional(DeliveryMode::kAsk);
  if (!mode) {
    return badRequest("header Kshard-Mode: must be ask or tell");
  }
  m.mode = *mode;
  return std::nullopt;
}

}  // namespace

http::Response authorizationError(const Status& status) {
  if (status.code() == StatusCode::kUnauthenticated) {
    return sidecarError(401, errors::kUnauthenticated, status.message());
  }
  if (status.code() == StatusCode::kUnavailable) {
    return sidecarError(503, errors::kAuthenticationUnavailable, status.message());
  }
  return sidecarError(403, errors::kForbidden, status.message());
}

PeerApi::PeerApi(Identity self, EntityRegistry& registry, RoutingTable& table,
                 RequestAuthorizer& authorizer, SidecarMetrics& metrics, const Clock& clock,
                 Logger logger, Options options)
    : self_(std::move(self)),
      registry_(registry),
      table_(table),
      authorizer_(authorizer),
      metrics_(metrics),
      clock_(clock),
      log_(std::move(logger)),
      options_(options) {}

void PeerApi::addRoutes(http::Server& server) {
  for (const char* pattern : kEntityPatterns) {
    server.route(http::Method::kPost, std::string("/v1/peer/entities") + pattern,
                 [this](http::Request&& r, http::Responder&& res) {
                   forwarded(std::move(r), std::move(res));
                 });
  }
  for (const char* pattern : {"/v1/peer/singletons/{name}", "/v1/peer/singletons/"}) {
    server.route(http::Method::kPost, pattern, [this](http::Request&& r, http::Responder&& res) {
      std::string name(r.param("name"));
      forwardedTo(singletonKey(std::move(name)), true, std::move(r), std::move(res));
    });
  }
  server.route(http::Method::kGet, "/v1/ping", [this](http::Request r, http::Responder res) {
    ping(std::move(r), std::move(res));
  });
  server.route(
      http::Method::kPost, "/v1/shards/assign",
      [this](http::Request r, http::Responder res) { assign(std::move(r), std::move(res)); });
  server.route(
      http::Method::kPost, "/v1/shards/unassign",
      [this](http::Request r, http::Responder res) { unassign(std::move(r), std::move(res)); });
}

std::optional<http::Response> PeerApi::admit(const http::Request& head) {
  const std::string_view path = head.path();
  const bool fromOperator = path == "/v1/ping" || path.starts_with("/v1/shards/");
  const bool fromPeer = path == http::channel::kPath || path.starts_with("/v1/peer/");
  if (!fromOperator && !fromPeer) {
    // No route here: the router's answer, without reading a body nobody takes.
    return http::Response::error(
        404, "NotFound",
        "no route for " + std::string(http::methodName(head.method)) + " " + std::string(path));
  }
  const Status s = fromOperator ? authorizer_.authorizeOperator(head) : authorizer_.admitPeer(head);
  if (s.ok()) return std::nullopt;
  return authorizationError(s);
}

void PeerApi::forwarded(http::Request&& request, http::Responder&& responder) {
  EntityKey key = takeEntityKey(request);
  forwardedTo(std::move(key), false, std::move(request), std::move(responder));
}

void PeerApi::forwardedTo(EntityKey key, bool singleton, http::Request&& request,
                          http::Responder&& responder) {
  const SteadyTime start = clock_.now();
  if (Status s = authorizer_.authorizePeer(request); !s.ok()) {
    responder.send(authorizationError(s));
    return;
  }
  Message m;
  m.key = std::move(key);
  if (Status s = validateEntityKey(m.key, options_.maxIdBytes); !s.ok()) {
    responder.send(badRequest(s.message()));
    return;
  }
  // Reserved for singletons (their own route), as on the app API: a sidecar older than the
  // reservation does not refuse it there, and could forward it.
  if (!singleton && m.key.type == kSingletonEntityType) {
    responder.send(badRequest("entity type: " + std::string(kSingletonEntityType) +
                              " is reserved for singletons"));
    return;
  }
  const auto snapshot = table_.snapshot();
  if (snapshot->shardCount == 0) {
    responder.send(notReady());
    return;
  }
  // As on the app API: only the spec's singletons exist. The sender checked its own copy of the
  // spec; one that is newer than this one gets the same answer its app would have got a moment
  // earlier.
  const auto& declared = snapshot->spec.singletons;
  if (singleton && std::find(declared.begin(), declared.end(), m.key.id) == declared.end()) {
    responder.send(sidecarError(404, errors::kNotFound,
                                "no singleton " + m.key.id + " in the ShardMap's spec.singletons"));
    return;
  }
  if (std::optional<http::Response> refusal =
          takeRouting(request.headers, snapshot->shardCount, m)) {
    responder.send(std::move(*refusal));
    return;
  }
  m.headers = std::move(request.headers);
  m.body = std::move(request.body);
  const ShardId shard = m.shard;

  registry_.deliver(
      std::move(m), [this, shard, start, res = std::move(responder)](DeliveryOutcome&& o) mutable {
        MessageResult result = MessageResult::kOk;
        http::Response out = deliveredAnswer(std::move(o), shard, result);
        metrics_.countMessage(MessagePath::kReceived, result);
        metrics_.observeLatency(MessagePath::kReceived,
                                std::chrono::duration<double>(clock_.now() - start).count());
        res.send(std::move(out));
      });
}

http::Response PeerApi::deliveredAnswer(DeliveryOutcome&& o, ShardId shard, MessageResult& result) {
  http::Response out;
  if (isOverload(o.refusal)) {
    result = MessageResult::kOverloaded;
    out = sidecarError(503, overloadCode(*o.refusal), overloadMessage(*o.refusal));
  } else if (o.refusal) {
    result = MessageResult::kRefused;
    json body = {
        {"error",
         {{"code", errors::kEntityNotManagedByThisPod},
          {"message", "pod " + self_.pod + " does not own shard " + std::to_string(shard)}}}};
    const RouteOwner* owner = table_.snapshot()->ownerOf(shard);
    if (owner != nullptr && owner->pod != self_.pod) body["owner"] = owner->pod;
    out = http::Response::json(409, body.dump());
    out.headers.set(std::string(protocol::kErrorHeader),
                    std::string(errors::kEntityNotManagedByThisPod));
  } else if (!o.response.ok()) {
    result = MessageResult::kFailed;
    out = appFailure(o.response.status());
  } else {
    out = std::move(*o.response);
    if (out.status >= 300) result = MessageResult::kAppError;
    out.headers.set(std::string(protocol::kOwnerHeader), self_.pod);
  }
  return out;
}

void PeerApi::ping(http::Request request, http::Responder responder) {
  if (Status s = authorizer_.authorizeOperator(request); !s.ok()) {
    responder.send(authorizationError(s));
    return;
  }
  auto target = protocol::targetFromQuery(request.queryParam("pod"), request.queryParam("uid"),
                                          request.queryParam("incarnation"));
  if (!target.ok()) {
    responder.send(badRequest(target.status().message()));
    return;
  }
  if (auto refusal = wrongTarget(*target)) {
    responder.send(std::move(*refusal));
    return;
  }
  protocol::PingResponse p;
  p.pod = self_.pod;
  p.uid = self_.uid;
  p.incarnation = self_.incarnation;
  const auto owned = registry_.ownedShards();
  for (ShardId s : owned) p.epoch = std::max<Epoch>(p.epoch, registry_.ownedEpoch(s).value_or(0));
  p.shards = sharding::ShardSet::of(owned).toString();
  // The operator balances by it (spec.balance: load) and shows it in the map's status.
  auto& load = p.load.emplace();
  for (const ShardLoad& l : registry_.sampleLoad(kLoadHalfLife)) {
    if (l.busy > 0) load.emplace_back(l.shard, l.busy);
  }
  responder.send(http::Response::json(200, protocol::encode(p)));
}

std::optional<http::Response> PeerApi::wrongTarget(const protocol::Target& target) const {
  if (target == self_.target()) return std::nullopt;
  json body = {
      {"error",
       {{"code", errors::kWrongTarget},
        {"message", "this sidecar is pod " + self_.pod + " (uid " + self_.uid + ", incarnation " +
                        self_.incarnation + "), not pod " + target.pod + " (uid " + target.uid +
                        ", incarnation " + target.incarnation + ")"}}},
      {"pod", self_.pod},
      {"uid", self_.uid},
      {"incarnation", self_.incarnation}};
  http::Response out = http::Response::json(409, body.dump());
  out.headers.set(std::string(protocol::kErrorHeader), std::string(errors::kWrongTarget));
  return out;
}

std::optional<PeerApi::Command> PeerApi::command(const http::Request& request,
                                                 http::Responder& responder) {
  if (Status s = authorizer_.authorizeOperator(request); !s.ok()) {
    responder.send(authorizationError(s));
    return std::nullopt;
  }
  const auto snapshot = table_.snapshot();
  if (snapshot->shardCount == 0) {
    responder.send(notReady());
    return std::nullopt;
  }
  auto req = protocol::decodeShardsRequest(request.body, snapshot->shardCount);
  if (!req.ok()) {
    responder.send(badRequest(req.status().message()));
    return std::nullopt;
  }
  if (req->shardMap != self_.shardMap.toString()) {
    responder.send(sidecarError(
        404, errors::kUnknownShardMap,
        "this sidecar serves " + self_.shardMap.toString() + ", not " + req->shardMap));
    return std::nullopt;
  }
  if (auto refusal = wrongTarget(req->target)) {
    log_.warn("command for another target refused",
              {{"target_pod", req->target.pod},
               {"target_uid", req->target.uid},
               {"target_incarnation", req->target.incarnation}});
    responder.send(std::move(*refusal));
    return std::nullopt;
  }
  const auto mapEpoch = static_cast<protocol::Epoch>(std::max<std::int64_t>(snapshot->epoch, 0));
  if (req->epoch > mapEpoch && req->epoch - mapEpoch > kMaxEpochLead) {
    log_.warn("command epoch too far ahead of the map refused",
              {{"epoch", req->epoch}, {"map_epoch", mapEpoch}});
    responder.send(sidecarError(
        409, errors::kEpochTooFarAhead,
        "epoch " + std::to_string(req->epoch) + " is more than " + std::to_string(kMaxEpochLead) +
            " past this sidecar's ShardMap (epoch " + std::to_string(mapEpoch) +
            "): the operator cannot have issued it; sent again once the map caught up, it is "
            "taken"));
    return std::nullopt;
  }
  Command out{std::move(*req), {}};
  out.request.shards.forEach([&](ShardId s) { out.shards.push_back(s); });
  return out;
}

void PeerApi::assign(http::Request request, http::Responder responder) {
  auto cmd = command(request, responder);
  if (!cmd) return;
  const auto refused = registry_.assign(cmd->shards, cmd->request.epoch);
  log_.info("shards assigned", {{"epoch", cmd->request.epoch},
                                {"shards", cmd->request.shards.toString()},
                                {"refused", sharding::ShardSet::of(refused).toString()}});
  responder.send(http::Response::json(
      200, protocol::encode(protocol::AssignResponse{sharding::ShardSet::of(refused)})));
}

void PeerApi::unassign(http::Request request, http::Responder responder) {
  auto cmd = command(request, responder);
  if (!cmd) return;
  const std::string text = cmd->request.shards.toString();
  const Epoch epoch = cmd->request.epoch;
  auto res = std::make_shared<http::Responder>(std::move(responder));
  registry_.unassign(
      cmd->shards, epoch, table_.snapshot()->spec.handoffTimeout,
      [this, text, epoch, res](std::vector<ShardId> busy) {
        metrics_.countHandoff(busy.empty());
        if (busy.empty()) {
          log_.info("shards unassigned", {{"epoch", epoch}, {"shards", text}});
          res->send(http::Response::json(200, "{}"));
          return;
        }
        const std::string still = sharding::ShardSet::of(busy).toString();
        log_.warn("handoff timed out", {{"epoch", epoch}, {"busy", still}});
        json body = {{"error",
                      {{"code", errors::kHandoffTimeout},
                       {"message", "shards still busy after the handoff timeout: " + still}}},
                     {"busy", still}};
        http::Response out = http::Response::json(504, body.dump());
        out.headers.set(std::string(protocol::kErrorHeader), std::string(errors::kHandoffTimeout));
        res->send(std::move(out));
      });
}

}  // namespace kshard::sidecar
