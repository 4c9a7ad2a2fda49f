// SidecarConfig: everything kshard-sidecar is told at start-up, from flags, the environment the
// injector sets (downward API) and an optional YAML file. See `kshard-sidecar --help`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/logger.h"
#include "base/options.h"
#include "base/status.h"
#include "protocol/wire.h"
#include "sidecar/identity.h"

namespace kshard::sidecar {

struct SidecarConfig {
  // Identity (downward API).
  std::string podName;
  std::string podNamespace;
  std::string podUid;
  std::string podIp;
  std::string hostIp;    // HOST_IP: the node, whose kubelet calls the preStop drain hook
  std::string shardMap;  // name of the ShardMap in the pod's namespace
  std::string version;
  // Ports and addresses.
  std::int64_t appPort = 8080;    // the app's entity callbacks, on 127.0.0.1
  std::int64_t apiPort = 7100;    // app API, on 127.0.0.1
  std::int64_t peerPort = 7101;   // peer API, on the pod IP
  std::int64_t adminPort = 7102;  // /metrics, /healthz, /readyz
  std::string peerBindAddress;    // default: the pod IP
  std::string adminBindAddress = "0.0.0.0";
  // Limits and timeouts.
  std::int64_t maxBodyBytes = 4 << 20;
  std::int64_t maxIdBytes = 1024;
  Duration appTimeout = std::chrono::seconds(30);   // one message at the app
  Duration stopTimeout = std::chrono::seconds(30);  // one stop call at the app
  Duration appWaitTimeout = std::chrono::minutes(5);
  Duration resetTimeout = std::chrono::minutes(1);  // the app's reset callback
  // A drained pod that is not being deleted serves again after this (sidecar/drainer.h).
  Duration drainLinger = std::chrono::seconds(15);
  // The app container's own preStop hook, as JSON (the injector moves it here and points the
  // container's preStop at the drain): run once the drain is over.
  std::string appPreStop;
  // When set, the admin port's drain endpoint requires it in Kshard-Drain-Token (the injector
  // puts the same per-pod secret in the preStop hook).
  std::string drainToken;
  // Entity stop calls at the app at once; tells accepted and not yet answered by the app, and
  // their bytes (EntityRegistryOptions).
  std::int64_t maxConcurrentStops = protocol::kMaxConcurrentStops.defaultValue;
  std::int64_t maxPendingTells = protocol::kMaxPendingTells.defaultValue;
  std::int64_t maxPendingTellBytes = protocol::kMaxPendingTellBytes.defaultValue;
  std::int64_t ioThreads = 2;
  // How those threads run their event loops: "thread" (one loop per thread; a message stays on
  // the thread that received it) or "shared" (one loop that every thread runs).
  std::string ioModel = "thread";
  // How messages go to other sidecars: "channel" (http/channel.h) or "http".
  std::string peerTransport = "channel";
  // Where the ShardMap comes from: "kube" (watch it through the API) or "manager" (poll the
  // operator's assignments endpoint; for environments without API access, and tests).
  std::string mapSource = "kube";
  std::string managerAddress;  // overrides status.manager; required with map-source=manager
  // The pod's projected service-account token for the manager API (audience kshard.io/operator);
  // empty: none is sent.
  std::string managerTokenFile;
  // The pod's projected token for the other sidecars of its ShardMap (audience
  // kshard.io/peer/<ns>/<map>), sent with forwarded messages; empty: none is sent.
  std::string peerTokenFile;
  // "token" or "none": see --peer-auth. Secure by default: "none" must be asked for.
  std::string peerAuth = "token";
  std::string operatorIdentity;  // "system:serviceaccount:kshard-system:kshard"
  // With peer-auth=token: the issuer's keys from this JWKS file, and tokens' iss, instead of
  // the API server's OIDC discovery (clusters that distribute them otherwise; benchmarks).
  std::string issuerKeysFile;
  std::string issuer;
  Duration mapPollInterval = std::chrono::seconds(1);
  std::string kubeconfig;
  std::string logLevel = "info";
  std::string httpBackend = "beast";

  // Declares every option on `opts`, with this object's values as the defaults.
  void declare(OptionSet& opts);
  // Cross-field checks after parsing; InvalidArgument naming the option.
  [[nodiscard]] Status validate() const;
  // The identity the sidecar announces.
  Identity identity() const;
};

}  // namespace kshard::sidecar
