#include "tools/kshardctl.h"

#include <gtest/gtest.h>

#include "tests/tools/kshardctl_runner.h"

namespace kshard::tools {
namespace {

TEST(KshardctlTest, HelpListsEveryCommand) {
  for (const char* flag : {"--help", "-h", "help"}) {
    const RunResult r = runInProcess({flag});
    EXPECT_EQ(r.exitCode, kExitOk) << flag;
    EXPECT_EQ(r.out.rfind("Usage: kshardctl <command>", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("\n  shard-of "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n  plan "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n  top "), std::string::npos) << r.out;
  }
}

TEST(KshardctlTest, NoCommandPrintsUsageToStderrAndExitsWithTwo) {
  const RunResult r = runInProcess({});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("Usage: kshardctl <command>", 0), 0u) << r.err;
}

TEST(KshardctlTest, UnknownCommandExitsWithTwoAndUsage) {
  const RunResult r = runInProcess({"simulat"});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_EQ(r.err.rfind("kshardctl: unknown command \"simulat\"\n\nUsage: kshardctl", 0), 0u)
      << r.err;
}

TEST(KshardctlTest, CommandHelpIsThatCommandsUsage) {
  EXPECT_EQ(runInProcess({"plan", "-h"}).out.rfind("Usage: kshardctl plan", 0), 0u);
  EXPECT_EQ(
      runInProcess({"top", "pods", "--help"}).out.rfind("Usage: kshardctl top pods|shards", 0), 0u);
  EXPECT_EQ(runInProcess({"shard-of", "--shards", "3", "--help"})
                .out.rfind("Usage: kshardctl shard-of", 0),
            0u);
  // After "--" a "--help" is an entity id.
  EXPECT_EQ(runInProcess({"shard-of", "--shards", "300", "--", "--help"}).exitCode, kExitOk);
}

}  // namespace
}  // namespace kshard::tools
