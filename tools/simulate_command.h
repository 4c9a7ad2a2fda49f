// `kshardctl simulate`: a deterministic discrete-event simulation of shard rebalancing on
// Kubernetes — kshard's planner and rebalance workflow beside Akka's allocation strategies and a
// consistent-hash ring — through scale-up, scale-down, rolling update and crash scenarios; with
// --workload, the workload mode (tools/simulate_load_command.h). The models are described in the
// command's --help and in docs/benchmarks.md.
#pragma once

#include <iosfwd>
#include <span>
#include <string>

#include "base/clock.h"
#include "tools/command.h"

namespace kshard::tools {

const Command& simulateCommand();

// The command with an injected wall clock, which only paces the progress lines on stderr (the
// results on stdout depend on the arguments alone).
int runSimulate(std::span<const std::string> args, CommandIo& io, const Clock& wallClock);

}  // namespace kshard::tools
