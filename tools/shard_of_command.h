// `kshardctl shard-of --shards N ID...`: the shard of each entity id, one per line.
#pragma once

#include "tools/command.h"

namespace kshard::tools {

const Command& shardOfCommand();

}  // namespace kshard::tools
