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
  // This sidecar process: drawn at random at start. The operator's commands name it, so a
  // restarted sidecar never acts on a command meant for its previous process (whose entities
  // the app dropped: see AppHost::reset).
  std::string incarnation;

  protocol::Target target() const { return {pod, uid, incarnation}; }
};

// A fresh incarnation: 64 random bits in hex.
std::string newIncarnation();

}  // namespace kshard::sidecar
