#include "tools/command.h"

#include <ostream>

namespace kshard::tools {

bool wantsHelp(std::span<const std::string> args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

int usageError(CommandIo& io, std::string_view command, std::string_view message) {
  // One line, whatever the input echoed in the message contains.
  std::string line;
  for (char c : message) {
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else {
      line += c;
    }
  }
  io.err << "kshardctl " << command << ": " << line << "\n";
  return kExitUsage;
}

}  // namespace kshard::tools
