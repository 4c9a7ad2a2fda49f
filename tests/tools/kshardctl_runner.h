// Runs kshardctl for the tests: in-process through runKshardctl, or as the real binary.
#pragma once

#include <string>
#include <vector>

namespace kshard::tools {

struct RunResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

// runKshardctl with string streams.
RunResult runInProcess(const std::vector<std::string>& args, const std::string& input = "");

// Spawns the kshardctl binary (KSHARDCTL_PATH) with `input` on stdin and waits for it.
RunResult runBinary(const std::vector<std::string>& args, const std::string& input = "");

}  // namespace kshard::tools
