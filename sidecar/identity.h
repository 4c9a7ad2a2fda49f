// Identity: who this sidecar is (from the downward API) and which ShardMap it serves.
#pragma once

#include <string>

#include "protocol/wire.h"

namespace kshard::sidecar {

struct Identity {
  std::string pod;                 // POD_NAME
  std::string uid;                 // POD_UID
  std::string podIp;               // POD_IP
  std::string version;             // KSHARD_VERSION (the pod's version label)
  protocol::ShardMapRef shardMap;  // POD_NAMESPACE / KSHARD_SHARD_MAP
  std::string peerAddress;         // "podIp:peerPort", what the operator and other sidecars call
};

}  // namespace kshard::sidecar
