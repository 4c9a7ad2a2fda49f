#include "tools/simulate_command.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "tests/tools/kshardctl_runner.h"

namespace kshard::tools {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(SimulateCommandTest, IsListedInKshardctlHelp) {
  const RunResult r = runInProcess({"--help"});
  EXPECT_NE(r.out.find("\n  simulate "), std::string::npos) << r.out;
}

TEST(SimulateCommandTest, DefaultRunPrintsOneTableRowPerScenarioAndStrategy) {
  const RunResult r = runInProcess({"simulate", "--quiet"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> table = lines(r.out);
  ASSERT_EQ(table.size(), 2u + 16u) << r.out;
  EXPECT_EQ(table[0].rfind("| shards | pods ", 0), 0u) << table[0];
  for (const char* scenario : {"scale-up", "scale-down", "rolling-update", "crash"}) {
    for (const char* strategy : {"kshard", "akka-classic", "akka", "ring"}) {
      const std::regex row(std::string(R"(\|\s+300 \| \d+->\d+.*\| )") + scenario + R"(\s+\| )" +
                           strategy + R"(\s+\|.*)");
      EXPECT_EQ(std::count_if(table.begin(), table.end(),
                              [&](const std::string& l) { return std::regex_match(l, row); }),
                1)
          << scenario << " " << strategy << "\n"
          << r.out;
    }
  }
}

TEST(SimulateCommandTest, SameArgumentsGiveTheSameOutput) {
  const std::vector<std::string> args = {"simulate", "--quiet", "--sizes", "400x5,1000x10",
                                         "--seed",   "42",      "--crash", "2",
                                         "--format", "csv"};
  const RunResult a = runInProcess(args);
  const RunResult b = runInProcess(args);
  ASSERT_EQ(a.exitCode, kExitOk) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(SimulateCommandTest, CsvHasAHeaderAndOneLinePerRun) {
  const RunResult r = runInProcess({"simulate", "--quiet", "--format", "csv", "--scenarios",
                                    "crash,scale-up", "--strategies", "ring,kshard"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  const std::vector<std::string> csv = lines(r.out);
  ASSERT_EQ(csv.size(), 5u) << r.out;
  EXPECT_EQ(csv[0],
            "shards,pods_before,pods_after,crashed,scenario,strategy,moves,moves_per_shard,"
            "max_moves_one_shard,placements,rounds,settle_seconds,settled,worst_imbalance,"
            "final_imbalance,unassigned");
  // Runs in the order asked: scenarios, then strategies.
  EXPECT_EQ(csv[1].rfind("300,3,3,1,crash,ring,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[2].rfind("300,3,3,1,crash,kshard,", 0), 0u) << csv[2];
  EXPECT_EQ(csv[3].rfind("300,3,6,0,scale-up,ring,", 0), 0u) << csv[3];
  EXPECT_EQ(csv[4].rfind("300,3,6,0,scale-up,kshard,", 0), 0u) << csv[4];
}

TEST(SimulateCommandTest, KshardRollingUpdateAtTheDefaultSizeMovesEveryShardOnce) {
  const RunResult r = runInProcess({"simulate", "--quiet", "--format", "csv", "--scenarios",
                                    "rolling-update", "--strategies", "kshard"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  const std::vector<std::string> csv = lines(r.out);
  ASSERT_EQ(csv.size(), 2u);
  // moves 300, 1.0 per shard, no shard twice, no placement; settled, balanced.
  EXPECT_TRUE(std::regex_match(
      csv[1],
      std::regex(R"(300,3,3,0,rolling-update,kshard,300,1\.0000,1,0,\d+,[0-9.]+,true,\d+,0,0)")))
      << csv[1];
}

TEST(SimulateCommandTest, MaxUnregisterHoldZeroTurnsTheHoldOff) {
  // 20 pods: 5 old pods are deleted before any new pod is ready. Held, their shards wait for the
  // new pods; not held, they go to old pods first.
  const std::vector<std::string> args = {"simulate",     "--quiet", "--format",    "csv",
                                         "--sizes",      "1000x20", "--scenarios", "rolling-update",
                                         "--strategies", "kshard"};
  const RunResult held = runInProcess(args);
  std::vector<std::string> offArgs = args;
  offArgs.insert(offArgs.end(), {"--max-unregister-hold", "0"});
  const RunResult off = runInProcess(offArgs);
  ASSERT_EQ(held.exitCode, kExitOk) << held.err;
  ASSERT_EQ(off.exitCode, kExitOk) << off.err;
  EXPECT_EQ(lines(held.out).at(1).rfind("1000,20,20,0,rolling-update,kshard,1000,1.0000,1,", 0), 0u)
      << held.out;
  EXPECT_TRUE(std::regex_match(
      lines(off.out).at(1), std::regex(R"(1000,20,20,0,rolling-update,kshard,1\d{3},1\.[1-9].*)")))
      << off.out;
}

TEST(SimulateCommandTest, ARunCutShortByMaxTimeSaysItDidNotSettle) {
  // akka-classic moves one shard per 10 s round: 150 rounds do not fit in 5 minutes.
  const RunResult r = runInProcess({"simulate", "--quiet", "--scenarios", "scale-up",
                                    "--strategies", "akka-classic", "--max-time", "5m"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.out.find("(not settled)"), std::string::npos) << r.out;
  const RunResult csv =
      runInProcess({"simulate", "--quiet", "--scenarios", "scale-up", "--strategies",
                    "akka-classic", "--max-time", "5m", "--format", "csv"});
  EXPECT_NE(csv.out.find(",false,"), std::string::npos) << csv.out;
}

TEST(SimulateCommandTest, ProgressGoesToStderrOneLinePerRun) {
  ManualClock clock;
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  CommandIo io{in, out, err};
  const std::vector<std::string> args = {"--scenarios", "scale-up", "--strategies", "kshard,ring"};
  ASSERT_EQ(runSimulate(args, io, clock), kExitOk) << err.str();
  const std::vector<std::string> progress = lines(err.str());
  ASSERT_EQ(progress.size(), 2u) << err.str();
  EXPECT_EQ(progress[0].rfind("kshardctl simulate: [1/2] 300x3 scale-up kshard: ", 0), 0u)
      << progress[0];
  EXPECT_EQ(progress[1].rfind("kshardctl simulate: [2/2] 300x3 scale-up ring: ", 0), 0u)
      << progress[1];
  EXPECT_EQ(out.str().rfind("| shards", 0), 0u) << "stdout holds the table alone";
}

// The options listed in `help` (one a line, at its start).
std::vector<std::string> optionsIn(const std::string& help) {
  const std::regex option(R"(\n  (--[a-z-]+)( [A-Z|%]+)?)");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), option);
       it != std::sregex_iterator(); ++it) {
    names.push_back((*it)[1]);
  }
  return names;
}

TEST(SimulateCommandTest, EveryOptionInTheHelpIsAccepted) {
  const RunResult help = runInProcess({"simulate", "--help"});
  ASSERT_EQ(help.exitCode, kExitOk);
  ASSERT_EQ(help.out.rfind("Usage: kshardctl simulate", 0), 0u);
  const std::size_t workloadMode = help.out.find("\nWorkload mode");
  ASSERT_NE(workloadMode, std::string::npos) << help.out;
  const std::vector<std::string> scenarioOptions = optionsIn(help.out.substr(0, workloadMode));
  const std::vector<std::string> workloadOptions = optionsIn(help.out.substr(workloadMode));
  ASSERT_EQ(scenarioOptions.size(), 25u) << help.out;
  ASSERT_EQ(workloadOptions.size(), 18u) << help.out;
  const auto rejectedForItsValue = [](const std::vector<std::string>& args) {
    const RunResult r = runInProcess(args);
    // Rejected for its value (or, for a flag, for the stray argument), never as unknown.
    EXPECT_EQ(r.exitCode, kExitUsage) << args[args.size() - 2];
    EXPECT_EQ(r.err.find("unknown flag"), std::string::npos)
        << args[args.size() - 2] << ": " << r.err;
  };
  for (const std::string& name : scenarioOptions) {
    if (name != "--config") rejectedForItsValue({"simulate", name, "no-such-value"});
  }
  for (const std::string& name : workloadOptions) {
    if (name != "--workload") {
      rejectedForItsValue({"simulate", "--workload", "zipf", name, "no-such-value"});
    }
  }
}

struct BadInput {
  std::vector<std::string> args;
  std::string mentions;
};

TEST(SimulateCommandTest, BadInputExitsWithTwoAndOneLineNamingTheProblem) {
  const std::vector<BadInput> cases = {
      {{"--sizes", "0x3"}, "--sizes"},
      {{"--sizes", "300x0"}, "--sizes"},
      {{"--sizes", "300x10001"}, "--sizes"},
      {{"--sizes", "100001x3"}, "--sizes"},
      {{"--sizes", "300"}, "--sizes"},
      {{"--sizes", "300x3,"}, "--sizes"},
      {{"--scenarios", "scale-up,explode"}, "explode"},
      {{"--strategies", "zookeeper"}, "zookeeper"},
      {{"--format", "xml"}, "--format"},
      {{"--rebalance-rate", "0"}, "--rebalance-rate"},
      {{"--rebalance-rate", "1.5"}, "--rebalance-rate"},
      {{"--akka-relative-limit", "-0.1"}, "--akka-relative-limit"},
      {{"--akka-rebalance-threshold", "0"}, "--akka-rebalance-threshold"},
      {{"--virtual-nodes", "0"}, "--virtual-nodes"},
      {{"--drain", "5"}, "--drain"},
      {{"--drain", "-1s"}, "--drain"},
      {{"--rebalance-interval", "0s"}, "--rebalance-interval"},
      {{"--max-unregister-hold", "-1s"}, "--max-unregister-hold"},
      {{"--crash", "4"}, "cannot crash 4 of 3 pods"},
      {{"--crash", "101%"}, "--crash"},
      {{"--crash", "0"}, "--crash"},
      {{"--max-surge", "0", "--max-unavailable", "0%"}, "--max-unavailable"},
      {{"--seed", "-1"}, "--seed"},
      {{"--sizes"}, "--sizes"},
      {{"--bogus"}, "--bogus"},
      {{"300x3"}, "300x3"},
  };
  for (const BadInput& c : cases) {
    std::vector<std::string> args = {"simulate"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const RunResult r = runInProcess(args);
    EXPECT_EQ(r.exitCode, kExitUsage) << c.args[0];
    EXPECT_EQ(r.out, "") << c.args[0];
    EXPECT_EQ(r.err.rfind("kshardctl simulate: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.mentions), std::string::npos) << r.err;
  }
}

TEST(SimulateCommandTest, BinaryKeepsStdoutForTheResults) {
  const RunResult r = runBinary({"simulate", "--scenarios", "crash", "--format", "csv"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_EQ(lines(r.out).size(), 5u) << r.out;
  EXPECT_EQ(lines(r.err).size(), 4u) << "one progress line per run:\n" << r.err;
}

}  // namespace
}  // namespace kshard::tools
