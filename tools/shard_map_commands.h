// `kshardctl owner`, `kshardctl map` and `kshardctl top pods|shards`: a ShardMap read from the
// cluster, as kubectl users want it (the same binary installed as `kubectl-kshard` is the kubectl
// plugin `kubectl kshard`).
#pragma once

#include <span>
#include <string>

#include "kube/client.h"
#include "tools/command.h"

namespace kshard::tools {

const Command& ownerCommand();
const Command& mapCommand();
const Command& topCommand();

// The commands on an injected API client (tests), with `defaultNamespace` for a ShardMap named
// without one.
int runOwnerWith(std::span<const std::string> args, CommandIo& io, kube::Client& api,
                 const std::string& defaultNamespace);
int runMapWith(std::span<const std::string> args, CommandIo& io, kube::Client& api,
               const std::string& defaultNamespace);
// `args` start with top's subcommand: "pods" or "shards".
int runTopWith(std::span<const std::string> args, CommandIo& io, kube::Client& api,
               const std::string& defaultNamespace);

}  // namespace kshard::tools
