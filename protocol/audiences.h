// The audiences of the service-account tokens kshard's parties show each other. Each direction
// has its own, and the sidecar-bound ones name their ShardMap, so that a token a party receives
// opens nothing else:
//
//   sidecar -> operator   kOperatorAudience ("kshard.io/operator"): the pod's projected token,
//                         checked by the manager API (TokenReview; a pod may act only as itself).
//   operator -> sidecar   sidecarAudience(map) ("kshard.io/sidecar/<ns>/<name>"): minted by the
//                         operator with TokenRequest on its own ServiceAccount, per ShardMap; a
//                         sidecar takes ping, assign and unassign only with its own map's.
//   sidecar -> sidecar    peerAudience(map) ("kshard.io/peer/<ns>/<name>"): the pod's projected
//                         token, sent with forwarded messages; a sidecar takes only its own map's.
//   operator => sidecar   mapAnswerAudience(map) ("kshard.io/map-answer/<ns>/<name>"): minted
//                         like the sidecar audience's, on the manager's answers to reads of the
//                         map's changes, and only to the map's registered pods; a sidecar takes
//                         those answers only with its own map's, and nothing else with it.
//
// A pod of one ShardMap therefore holds nothing that another map's sidecars or the manager API
// would take from anyone but that pod: the operator's token it receives names its own map, and
// a peer's token it receives is refused by the operator (another audience) and by other maps.
#pragma once

#include <string>
#include <string_view>

namespace kshard::protocol {

inline constexpr std::string_view kOperatorAudience = "kshard.io/operator";

// `shardMap` is "<namespace>/<name>" (ShardMapRef::toString).
inline std::string sidecarAudience(std::string_view shardMap) {
  return "kshard.io/sidecar/" + std::string(shardMap);
}
inline std::string peerAudience(std::string_view shardMap) {
  return "kshard.io/peer/" + std::string(shardMap);
}
inline std::string mapAnswerAudience(std::string_view shardMap) {
  return "kshard.io/map-answer/" + std::string(shardMap);
}

}  // namespace kshard::protocol
