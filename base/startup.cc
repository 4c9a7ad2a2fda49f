#include "base/startup.h"

#include <pthread.h>

#include <cerrno>
#include <iostream>
#include <mutex>
#include <thread>

namespace kshard {

std::optional<int> parseCommandLine(OptionSet& opts, int argc, char** argv,
                                    const std::function<Status()>& check) {
  auto outcome = opts.parse(argc, argv);
  if (!outcome.ok()) {
    std::cerr << opts.program() << ": " << outcome.status().message() << "\n";
    return kExitConfig;
  }
  if (*outcome == OptionSet::Outcome::kHelp) {
    std::cout << opts.usage();
    return kExitOk;
  }
  if (Status s = check ? check() : Status(); !s.ok()) {
    std::cerr << opts.program() << ": " << s.message() << "\n";
    return kExitConfig;
  }
  return std::nullopt;
}

Logger loggerAtLevel(std::string component, const std::string& levelName) {
  LogLevel level = LogLevel::kInfo;
  parseLogLevel(levelName, level);
  return Logger(std::move(component), level);
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int StopSignals::wait() {
  int sig = 0;
  while (sigwait(&set_, &sig) != 0) {
  }
  return sig;
}

std::optional<int> StopSignals::waitFor(Duration timeout) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  timespec wait{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  const int sig = sigtimedwait(&set_, nullptr, &wait);
  if (sig == SIGTERM || sig == SIGINT) return sig;
  return std::nullopt;
}

void StopSignals::whileRunning(const std::function<void()>& work,
                               const std::function<void(int)>& onSignal) {
  std::mutex mu;
  bool done = false;
  std::thread watcher([&] {
    int sig = 0;
    while (sigwait(&set_, &sig) == 0) {
      std::lock_guard lock(mu);
      if (done) return;
      onSignal(sig);
    }
  });
  work();
  {
    std::lock_guard lock(mu);
    done = true;
  }
  // Wakes the watcher so that it sees `done` and ends.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
}

}  // namespace kshard
