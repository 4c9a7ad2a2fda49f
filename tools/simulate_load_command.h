// `kshardctl simulate --workload ...`: the workload mode of the simulate command
// (tools/simulate_load.h), which compares how evenly each strategy spreads a skewed load.
#pragma once

#include <span>
#include <string>

#include "tools/command.h"
#include "tools/simulate_load.h"

namespace kshard::tools {

// Whether `args` ask for the workload mode (--workload given).
bool wantsWorkload(std::span<const std::string> args);

// The workload mode: results on stdout (a Markdown table, or a JSON array with --format json),
// a line per strategy on stderr unless --quiet.
int runLoadSimulate(std::span<const std::string> args, CommandIo& io);

}  // namespace kshard::tools
