// Command: one kshardctl subcommand (shard-of, plan, simulate).
//
// A command is a name, a one-line summary for `kshardctl --help`, its usage text, and a function
// that runs it on the arguments after its name, with the process's streams passed in, so tests
// run commands in-process and check their output and exit code.
#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "base/options.h"
#include "base/status.h"

namespace kshard::tools {

// Exit codes of kshardctl and its commands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command could not do its job (not the input's fault)
inline constexpr int kExitUsage = 2;    // bad arguments or bad input: one line on stderr says why

struct CommandIo {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

struct Command {
  std::string_view name;
  std::string_view summary;
  std::string_view usage;  // full help text, ends with a newline
  int (*run)(std::span<const std::string> args, CommandIo& io);
};

// Whether `args` asks for help (-h or --help anywhere before a "--").
bool wantsHelp(std::span<const std::string> args);

// Parses a command's arguments (without the command's name) into `set`: flags only, no
// environment variables.
[[nodiscard]] Status parseArguments(OptionSet& set, std::span<const std::string> args);

// Writes "kshardctl <command>: <message>" as one line on stderr and returns kExitUsage.
int usageError(CommandIo& io, std::string_view command, std::string_view message);

}  // namespace kshard::tools
