// The wire contracts between kshard-operator and kshard-sidecar (DESIGN.md "Wire contracts"):
// the bodies of the manager API (operator :7200) and of the peer API's control calls (sidecar
// :7101), the error codes both sides use, and the header names of forwarded messages.
//
// Both sides link this one definition, so they cannot drift apart. Decoders validate everything
// that arrives from the network and name the offending field in their error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sharding/shard_set.h"

namespace kshard::protocol {

using Epoch = std::uint64_t;

// Header names on forwarded messages and app callbacks.
inline constexpr std::string_view kShardHeader = "Kshard-Shard";
inline constexpr std::string_view kEpochHeader = "Kshard-Epoch";
inline constexpr std::string_view kModeHeader = "Kshard-Mode";  // "ask" | "tell"
inline constexpr std::string_view kOwnerHeader = "Kshard-Owner";
// On every app callback (message, stop, reset): the sidecar process that sends it. An app drops
// callbacks of any other process than the one of its last reset: a callback the previous
// process sent, still queued in the app when the reset came, would start an entity that the
// sidecar does not know of.
inline constexpr std::string_view kIncarnationHeader = "Kshard-Incarnation";
// On the app's message and stop callbacks: the message's turn number, increasing over every
// message a sidecar process delivers; on a stop, the number of the entity's last message. An app
// refuses a message whose number is not above that of the stop it last answered for the entity:
// the message reached it after the stop, though it was sent before (its answer was given up).
inline constexpr std::string_view kTurnHeader = "Kshard-Turn";
// On the app's answer to a message or a start: "true" asks the sidecar to stop the entity after
// that turn (a remembered entity is forgotten first). Ignored for singletons.
inline constexpr std::string_view kPassivateHeader = "Kshard-Passivate";
// A client's key for one logical request, passed through unchanged to the app, which may use it
// to recognise a retry of a request it already applied (kshard never retries a message that may
// have reached the app; a caller that retries after OutcomeUnknown should send one).
inline constexpr std::string_view kIdempotencyKeyHeader = "Idempotency-Key";
// Set on every error a sidecar generates itself (its value is the error code), so a caller can
// tell a sidecar's 409 EntityNotManagedByThisPod from a 409 the app answered.
inline constexpr std::string_view kErrorHeader = "Kshard-Error";
// Bearer tokens of the callers (operator → sidecar, sidecar → sidecar, sidecar → operator).
inline constexpr std::string_view kAuthorizationHeader = "Authorization";
// On the manager's answers a sidecar acts on (GET .../assignments?since=): the operator's token
// for the map's sidecars, as on its calls to them, so that a sidecar takes the map's changes
// only from the operator (docs/decisions/0017-map-changes-not-copies.md).
inline constexpr std::string_view kManagerAuthorizationHeader = "Kshard-Manager-Authorization";
// The per-pod secret of the preStop drain hook (the injector puts it in the hook and in the
// sidecar's KSHARD_DRAIN_TOKEN): only the kubelet, which runs the hook, knows it.
inline constexpr std::string_view kDrainTokenHeader = "Kshard-Drain-Token";
// On a topic publication, to the peer API and to the app's topic callback: the topic, and the pod
// whose app published it (as its sidecar states it: informative, not a credential).
inline constexpr std::string_view kTopicHeader = "Kshard-Topic";
inline constexpr std::string_view kPublisherHeader = "Kshard-Publisher";

// Error codes in {"error": {"code": …, "message": …}} bodies.
namespace errors {
inline constexpr std::string_view kBadRequest = "BadRequest";
inline constexpr std::string_view kNotFound = "NotFound";
inline constexpr std::string_view kPayloadTooLarge = "PayloadTooLarge";
inline constexpr std::string_view kEntityNotManagedByThisPod = "EntityNotManagedByThisPod";
inline constexpr std::string_view kEntityOverloaded = "EntityOverloaded";
// 503 to a message that would start a new remembered entity beyond the bound of its shard's
// record or of its ShardMap's records (sidecar/remembered_entities.h); not retried.
inline constexpr std::string_view kRememberedEntitiesFull = "RememberedEntitiesFull";
inline constexpr std::string_view kSendTimeout = "SendTimeout";
inline constexpr std::string_view kAppUnavailable = "AppUnavailable";
// The message may or may not have been applied: the owner (or its app) took it and the
// connection broke, or no answer came in time. kshard does not send it again; a caller that
// retries should name the request with an Idempotency-Key its app checks.
inline constexpr std::string_view kOutcomeUnknown = "OutcomeUnknown";
inline constexpr std::string_view kNotLeader = "NotLeader";
inline constexpr std::string_view kPodNotAlive = "PodNotAlive";
inline constexpr std::string_view kUnknownShardMap = "UnknownShardMap";
inline constexpr std::string_view kStaleEpoch = "StaleEpoch";
inline constexpr std::string_view kHandoffTimeout = "HandoffTimeout";
inline constexpr std::string_view kDraining = "Draining";
inline constexpr std::string_view kUnauthenticated = "Unauthenticated";
inline constexpr std::string_view kForbidden = "Forbidden";
// The callee cannot verify the caller yet (keys not loaded, caller not yet in its ShardMap copy).
inline constexpr std::string_view kAuthenticationUnavailable = "AuthenticationUnavailable";
// 409 to an unregister: the manager holds the pod's shards while pods of a newer version start.
inline constexpr std::string_view kUnregisterDeferred = "UnregisterDeferred";
// 409 to a ping, assign or unassign meant for another pod, or for another process (incarnation)
// of this pod's sidecar: a command is never applied by a sidecar it was not meant for.
inline constexpr std::string_view kWrongTarget = "WrongTarget";
// 409 to an assign or unassign whose epoch lies further past the sidecar's copy of the ShardMap
// than the operator can have issued (sidecar/peer_api.h, kMaxEpochLead): nothing is applied.
inline constexpr std::string_view kEpochTooFarAhead = "EpochTooFarAhead";
// Topic publications (sidecar/topic_publisher.h), per pod: 503 from a pod whose ownership lease
// has run out without a renewal (it takes no new work); the app answered the topic callback with
// a status other than 2xx; the pod left the ShardMap before the publication could be sent to it.
inline constexpr std::string_view kLeaseFenced = "LeaseFenced";
inline constexpr std::string_view kAppRefused = "AppRefused";
inline constexpr std::string_view kPodLeft = "PodLeft";
}  // namespace errors

// POST /v1/shardmaps/{ns}/{name}/register
struct RegisterRequest {
  std::string pod;
  std::string uid;
  std::string address;  // "ip:port" of the pod's peer API
  std::string version;  // the pod's version label; may be empty
  // The registering sidecar process: a random id drawn at its start (sharding::RegisteredPod).
  std::string incarnation;
};
// 200 answer to register and unregister.
struct EpochResponse {
  Epoch epoch = 0;
  // Unregister only: whether the API showed the pod being deleted. A sidecar that drained while
  // its pod is not being deleted (a drain asked by hand, the app restarting alone) registers
  // again instead of waiting for a termination that will not come. Absent: not known.
  std::optional<bool> terminating;
};
// POST /v1/shardmaps/{ns}/{name}/unregister
struct UnregisterRequest {
  std::string pod;
  std::string uid;
};
// Body of a 409 UnregisterDeferred (operator/unregister_hold.h): the pod keeps its shards, and
// keeps serving them, until pods of a newer version have registered; it asks again after
// retryAfterMs. The hold ends within deferredForMs, so the caller may wait that long plus the
// handoff.
struct UnregisterDeferred {
  std::string message;
  std::int64_t retryAfterMs = 0;
  std::int64_t deferredForMs = 0;
  std::string version;            // the newer version being waited for
  std::int64_t startingPods = 0;  // its pods not registered yet
};
// POST /v1/shardmaps/{ns}/{name}/renew: a registered sidecar confirms its ownership lease (its
// body is its Target). 200 EpochResponse while the manager knows the pod alive and registered
// as that incarnation; 409 WrongTarget or 404 PodNotAlive otherwise (the sidecar registers again
// or stays fenced). See sidecar/ownership_lease.h.

// POST /v1/shardmaps/{ns}/{name}/notify-unhealthy
struct NotifyUnhealthyRequest {
  std::string pod;
};

// Whom an operator command (ping, assign, unassign) is meant for: the pod, and the sidecar
// process that registered it. A sidecar refuses a command naming anyone else (409 WrongTarget),
// so that a command never reaches a restarted sidecar, or a new pod that got a dead pod's IP.
struct Target {
  std::string pod;
  std::string uid;
  std::string incarnation;
  friend bool operator==(const Target&, const Target&) = default;
};

// GET /v1/ping?pod=&uid=&incarnation=
struct PingResponse {
  std::string pod;
  std::string uid;
  std::string incarnation;
  Epoch epoch = 0;     // highest epoch this pod holds a shard at
  std::string shards;  // owned shards, range form (not parsed: the caller knows the count)
  // The measured load of the owned shards that carry any: seconds the app spent on the shard's
  // messages per second (sidecar/shard_load.h). Owned shards not listed carry none. Absent: a
  // sidecar that does not measure load (an older release), which says nothing of its shards.
  std::optional<std::vector<std::pair<sharding::ShardId, double>>> load;
};
// The largest load a ping answer may report for a shard (app seconds per second: a million
// turns at once); larger figures are taken as this, so that sums of them stay finite.
inline constexpr double kMaxShardLoad = 1e6;

// POST /v1/shards/assign and /v1/shards/unassign.
//
// An assign carries the epoch at which the operator persisted these owners. An unassign carries
// the epoch at which the shards leave the pod: the sidecar fences them, refusing any assign with
// an older epoch that arrives later (a delayed duplicate).
struct ShardsRequest {
  std::string shardMap;  // "{namespace}/{name}"
  Target target;
  Epoch epoch = 0;
  sharding::ShardSet shards;
};
// 200 answer to assign: the shards refused as stale (empty when all were taken).
struct AssignResponse {
  sharding::ShardSet refused;
};

// Body of a 409 EntityNotManagedByThisPod: the owner this pod believes in, if any.
struct NotManagedError {
  std::string message;
  std::optional<std::string> owner;
};

std::string encode(const RegisterRequest& r);
std::string encode(const EpochResponse& r);
std::string encode(const UnregisterRequest& r);
std::string encode(const UnregisterDeferred& r);
std::string encode(const NotifyUnhealthyRequest& r);
std::string encode(const PingResponse& r);
std::string encode(const ShardsRequest& r);
std::string encode(const AssignResponse& r);
std::string encode(const Target& r);

[[nodiscard]] StatusOr<RegisterRequest> decodeRegisterRequest(std::string_view body);
[[nodiscard]] StatusOr<EpochResponse> decodeEpochResponse(std::string_view body);
[[nodiscard]] StatusOr<UnregisterRequest> decodeUnregisterRequest(std::string_view body);
[[nodiscard]] StatusOr<UnregisterDeferred> decodeUnregisterDeferred(std::string_view body);
[[nodiscard]] StatusOr<NotifyUnhealthyRequest> decodeNotifyUnhealthyRequest(std::string_view body);
[[nodiscard]] StatusOr<Target> decodeTarget(std::string_view body);
[[nodiscard]] StatusOr<PingResponse> decodePingResponse(std::string_view body);
// `shardCount` bounds the shard ids (1..shardCount).
[[nodiscard]] StatusOr<ShardsRequest> decodeShardsRequest(std::string_view body,
                                                          std::int32_t shardCount);
[[nodiscard]] StatusOr<AssignResponse> decodeAssignResponse(std::string_view body,
                                                            std::int32_t shardCount);
// The ping's query parameters, and the target they name; InvalidArgument naming a missing or
// malformed one.
std::string pingQuery(const Target& target);
[[nodiscard]] StatusOr<Target> targetFromQuery(std::optional<std::string_view> pod,
                                               std::optional<std::string_view> uid,
                                               std::optional<std::string_view> incarnation);

// Sidecar limits that the injector passes on (as KSHARD_* variables, from the chart): each
// one's default and the range both sides accept.
struct IntSetting {
  std::int64_t defaultValue;
  std::int64_t min;
  std::int64_t max;
};
inline constexpr IntSetting kMaxConcurrentStops{64, 1, 100000};
inline constexpr IntSetting kMaxPendingTells{10000, 1, std::int64_t{1} << 30};
inline constexpr IntSetting kMaxPendingTellBytes{std::int64_t{32} << 20, 1024,
                                                 std::int64_t{1} << 40};

// "{namespace}/{name}" split into its parts; InvalidArgument unless both are DNS-1123 names.
struct ShardMapRef {
  std::string ns;
  std::string name;
  std::string toString() const { return ns + "/" + name; }
  friend bool operator==(const ShardMapRef&, const ShardMapRef&) = default;
};
[[nodiscard]] StatusOr<ShardMapRef> parseShardMapRef(std::string_view text);
// True for a DNS-1123 label (lowercase alphanumerics and '-', 1..63, alphanumeric at both ends),
// what Kubernetes requires of namespace names; object names may also contain '.' (subdomain).
bool isDnsLabel(std::string_view s);
bool isDnsSubdomain(std::string_view s);
// "system:serviceaccount:<namespace>:<name>", the subject of a ServiceAccount's tokens.
bool isServiceAccountSubject(std::string_view s);

}  // namespace kshard::protocol
