// kshardctl: the command-line tool for kshard's sharding logic (shard-of, plan, simulate).
//
// The tool is a library so that tests run it in-process; kshardctl_main.cc only forwards argv
// and the standard streams. To add a command, write a Command (command.h) and list it in
// kshardctl.cc.
#pragma once

#include <iosfwd>
#include <span>
#include <string>

#include "tools/command.h"

namespace kshard::tools {

// Runs kshardctl with `args` (argv without the program name). Returns the exit code.
int runKshardctl(std::span<const std::string> args, std::istream& in, std::ostream& out,
                 std::ostream& err);

}  // namespace kshard::tools
