// Test support: child processes (a binary under test, with its own environment and a log file)
// and free loopback ports. For component tests that run kshard's real binaries.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kshard::testing {

class Subprocess {
 public:
  // Starts `argv[0]` with `argv` and the current environment plus `env`; stdout and stderr go to
  // `logPath`. Aborts the test on failure to start.
  Subprocess(std::vector<std::string> argv, std::map<std::string, std::string> env,
             std::string logPath);
  ~Subprocess();  // SIGKILL if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // Waits up to `timeout` for the process to exit; its exit code, or -1 on timeout, or 128+n
  // when killed by signal n.
  int wait(std::chrono::milliseconds timeout);
  bool running();
  const std::string& logPath() const { return logPath_; }
  // The last `maxBytes` of the log, for failure messages.
  std::string logTail(std::size_t maxBytes = 4000) const;

 private:
  pid_t pid_ = -1;
  int exitCode_ = -1;
  bool exited_ = false;
  std::string logPath_;
};

// A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's range for outgoing
// connections so that no connection takes it before the child binds it; never the same twice in
// one process.
std::uint16_t freeLoopbackPort();

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool waitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

}  // namespace kshard::testing
