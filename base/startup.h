// Start-up steps both kshard binaries share: the command line (options, --help, the
// cross-field checks), the logger at the configured level, and the stop signals.
//
// A binary's main parses its options with parseCommandLine, makes its logger with
// loggerAtLevel, blocks the stop signals with StopSignals before it starts any thread, then
// builds and runs its server class and waits on the signals.
#pragma once

#include <signal.h>

#include <functional>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/logger.h"
#include "base/options.h"
#include "base/status.h"

namespace kshard {

// Exit codes of both binaries.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitConfig = 2;  // an option, or a file an option names, is wrong

// Parses `argv` into `opts`, then runs `check` (the configuration's cross-field checks), if any.
// Returns the exit code when the program is done: 0 after --help (usage on stdout), 2 after an
// error (on stderr, prefixed with the program's name). nullopt: go on.
[[nodiscard]] std::optional<int> parseCommandLine(OptionSet& opts, int argc, char** argv,
                                                  const std::function<Status()>& check = {});

// A logger for `component` at the level named `levelName` (info when it names none; the
// configuration's checks have refused unknown names by then).
Logger loggerAtLevel(std::string component, const std::string& levelName);

// SIGTERM and SIGINT, taken synchronously. The constructor blocks them on the calling thread,
// so construct it on the main thread before any other thread starts: every thread inherits the
// mask and the signals wait for wait()/waitFor(). It also ignores SIGPIPE (a peer that closed a
// socket is an error return, not a signal).
class StopSignals {
 public:
  StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until a stop signal arrives; returns it.
  int wait();
  // The stop signal that arrived within `timeout`, or nullopt.
  std::optional<int> waitFor(Duration timeout);
  // Runs `onSignal` for every stop signal that arrives while `work` runs, on a thread of its
  // own, then returns. For work that must not be cut short by a second signal (a drain).
  void whileRunning(const std::function<void()>& work, const std::function<void(int)>& onSignal);

 private:
  sigset_t set_;
};

}  // namespace kshard
