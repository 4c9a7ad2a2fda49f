#include "tools/command.h"

#include <optional>
#include <ostream>
#include <vector>

namespace kshard::tools {

bool wantsHelp(std::span<const std::string> args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

Status parseArguments(OptionSet& set, std::span<const std::string> args) {
  std::vector<const char*> argv{"kshardctl"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  StatusOr<OptionSet::Outcome> parsed =
      set.parse(static_cast<int>(argv.size()), argv.data(),
                [](const std::string&) { return std::optional<std::string>(); });
  return parsed.status();
}

int usageError(CommandIo& io, std::string_view command, std::string_view message) {
  // One line, whatever the input echoed in the message contains.
  std::string line(message);
  for (auto at = line.find_first_of("\n\r"); at != std::string::npos;
       at = line.find_first_of("\n\r", at + 2)) {
    line.replace(at, 1, line[at] == '\n' ? "\\n" : "\\r");
  }
  io.err << "kshardctl " << command << ": " << line << "\n";
  return kExitUsage;
}

}  // namespace kshard::tools
