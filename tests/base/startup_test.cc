#include "base/startup.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace kshard {
namespace {

struct CommandLine {
  std::string name = "x";
  OptionSet opts{"prog", "A program."};
  CommandLine() { opts.addString("name", "", "a name", &name); }
  std::optional<int> parse(std::vector<const char*> args, Status check = Status()) {
    args.insert(args.begin(), "prog");
    return parseCommandLine(opts, static_cast<int>(args.size()), const_cast<char**>(args.data()),
                            [&] { return check; });
  }
};

TEST(ParseCommandLine, GoesOnWhenTheOptionsAndTheChecksPass) {
  CommandLine c;
  EXPECT_EQ(c.parse({"--name=y"}), std::nullopt);
  EXPECT_EQ(c.name, "y");
}

TEST(ParseCommandLine, ExitsZeroAfterHelp) {
  CommandLine c;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(c.parse({"--help"}), kExitOk);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("--name"), std::string::npos);
}

TEST(ParseCommandLine, ExitsTwoNamingTheProgramOnAnUnknownOptionOrAFailedCheck) {
  CommandLine c;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(c.parse({"--nope"}), kExitConfig);
  EXPECT_EQ(::testing::internal::GetCapturedStderr().rfind("prog: ", 0), 0u);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(c.parse({}, invalidArgument("--name is wrong")), kExitConfig);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "prog: --name is wrong\n");
}

TEST(LoggerAtLevel, TakesTheNamedLevel) {
  EXPECT_FALSE(loggerAtLevel("t", "warn").enabled(LogLevel::kInfo));
  EXPECT_TRUE(loggerAtLevel("t", "debug").enabled(LogLevel::kDebug));
  EXPECT_TRUE(loggerAtLevel("t", "").enabled(LogLevel::kInfo));
}

TEST(StopSignals, TakesAPendingSignalAndTimesOutWithoutOne) {
  StopSignals signals;
  EXPECT_EQ(signals.waitFor(std::chrono::milliseconds(10)), std::nullopt);
  pthread_kill(pthread_self(), SIGTERM);
  EXPECT_EQ(signals.waitFor(std::chrono::seconds(5)), SIGTERM);
  pthread_kill(pthread_self(), SIGINT);
  EXPECT_EQ(signals.wait(), SIGINT);
}

TEST(StopSignals, WhileRunningReportsSignalsThatArriveDuringTheWork) {
  StopSignals signals;
  std::vector<int> seen;
  signals.whileRunning(
      [] {
        kill(getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      },
      [&](int sig) { seen.push_back(sig); });
  EXPECT_EQ(seen, std::vector<int>{SIGINT});
  EXPECT_EQ(signals.waitFor(std::chrono::milliseconds(10)), std::nullopt)
      << "the wake-up of the watcher is not left pending";
}

}  // namespace
}  // namespace kshard
