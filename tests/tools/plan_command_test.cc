#include "tools/plan_command.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "tests/tools/kshardctl_runner.h"

namespace kshard::tools {
namespace {

constexpr char kExample[] =
    R"({"shards": 4, "pods": [{"name": "p1", "version": "1.0.0"},
        {"name": "p2", "version": "1.0.0", "ready": true, "terminating": false}],
        "assignments": {"p1": "1-3", "p2": "4"}, "immediate": false, "rebalanceRate": 1.0,
        "seed": SEED})";

std::string example(int seed) {
  std::string s = kExample;
  s.replace(s.find("SEED"), 4, std::to_string(seed));
  return s;
}

TEST(PlanCommandTest, ExampleMovesOneOfTheFirstPodsShardsToTheSecond) {
  const std::regex expected(
      R"(\{"moves": \[\{"shard": [123], "from": "p1", "to": "p2"\}\]\}
)");
  std::set<std::string> outputs;
  for (int seed = 0; seed < 32; ++seed) {
    const RunResult r = runInProcess({"plan"}, example(seed));
    EXPECT_EQ(r.exitCode, kExitOk) << r.err;
    EXPECT_TRUE(std::regex_match(r.out, expected)) << r.out;
    EXPECT_EQ(runInProcess({"plan"}, example(seed)).out, r.out) << "same input and seed";
    outputs.insert(r.out);
  }
  // Which of shards 1-3 moves depends on the seed.
  EXPECT_EQ(outputs.size(), 3u);
}

TEST(PlanCommandTest, PlacesUnassignedShardsWithNullFrom) {
  const RunResult r =
      runInProcess({"plan"}, R"({"shards": 3, "pods": [{"name": "a", "version": "1"},
                   {"name": "b", "version": "2"}, {"name": "c", "version": "2", "ready": false}],
                   "assignments": {"a": "1"}})");
  EXPECT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "{\"moves\": [{\"shard\": 2, \"from\": null, \"to\": \"b\"}, "
            "{\"shard\": 3, \"from\": null, \"to\": \"b\"}]}\n");
}

TEST(PlanCommandTest, DefaultRateIsTheShardMapDefault) {
  // 100 shards x 0.02: each empty pod receives 2 shards in one periodic round.
  const RunResult r =
      runInProcess({"plan"}, R"({"shards": 100, "pods": [{"name": "a", "version": "1"},
                   {"name": "b", "version": "1"}], "assignments": {"a": "1-100"}})");
  EXPECT_EQ(r.exitCode, kExitOk) << r.err;
  std::size_t moves = 0;
  for (std::size_t at = r.out.find("\"to\""); at != std::string::npos;
       at = r.out.find("\"to\"", at + 1)) {
    ++moves;
  }
  EXPECT_EQ(moves, 2u) << r.out;
}

TEST(PlanCommandTest, BadInputExitsWithTwoAndOneLine) {
  for (const char* input :
       {"", "not json", "{\"shards\": 4}", R"({"shards": 4, "pods": [], "rebalanceRate": 2})",
        R"({"shards": 4, "pods": [{"name": "a", "version": "1"}], "assignments": {"a": "0"}})"}) {
    const RunResult r = runInProcess({"plan"}, input);
    EXPECT_EQ(r.exitCode, kExitUsage) << input;
    EXPECT_EQ(r.out, "") << input;
    EXPECT_EQ(r.err.rfind("kshardctl plan: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  }
}

TEST(PlanCommandTest, ErrorsEchoingNamesStayOnOneLine) {
  const RunResult r =
      runInProcess({"plan"}, R"({"shards": 4, "pods": [{"name": "a\nb", "version": "1"},
                   {"name": "a\nb", "version": "1"}]})");
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_EQ(r.err, "kshardctl plan: pods[1].name: duplicate pod \"a\\nb\"\n");
}

TEST(PlanCommandTest, RejectsArguments) {
  const RunResult r = runInProcess({"plan", "problem.json"}, example(1));
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_EQ(r.err,
            "kshardctl plan: unexpected argument \"problem.json\" (the problem is read from "
            "stdin)\n");
}

TEST(PlanCommandTest, HelpDocumentsTheDefaults) {
  const RunResult r = runInProcess({"plan", "--help"});
  EXPECT_EQ(r.exitCode, kExitOk);
  EXPECT_NE(r.out.find("default 0.02"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kshard::tools
