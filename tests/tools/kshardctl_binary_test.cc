// End to end: the kshardctl binary, spawned as a user would run it.
#include <gtest/gtest.h>

#include "tests/tools/kshardctl_runner.h"
#include "tools/command.h"

namespace kshard::tools {
namespace {

TEST(KshardctlBinaryTest, ShardOfPrintsTheDesignExample) {
  const RunResult r = runBinary({"shard-of", "--shards", "300", "a", "guild1"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "98\n95\n");
  EXPECT_EQ(r.err, "");
}

TEST(KshardctlBinaryTest, ShardOfRejectsInvalidUtf8WithExitCodeTwo) {
  const RunResult r = runBinary({"shard-of", "--shards", "300", "ok", "\xFF"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "kshardctl shard-of: id 2: invalid UTF-8 at byte 0\n");
}

TEST(KshardctlBinaryTest, PlanReadsStdinAndIsReproducible) {
  const std::string problem =
      R"({"shards": 4, "pods": [{"name": "p1", "version": "1.0.0"},
          {"name": "p2", "version": "1.0.0", "ready": true, "terminating": false}],
          "assignments": {"p1": "1-3", "p2": "4"}, "immediate": false, "rebalanceRate": 1.0,
          "seed": 7})";
  const RunResult r = runBinary({"plan"}, problem);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, runInProcess({"plan"}, problem).out);
  EXPECT_EQ(r.out, runBinary({"plan"}, problem).out);
  EXPECT_NE(r.out.find(R"("from": "p1", "to": "p2"}]})"), std::string::npos) << r.out;
}

TEST(KshardctlBinaryTest, PlanRejectsInvalidJsonWithExitCodeTwo) {
  const RunResult r = runBinary({"plan"}, "{");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.err.rfind("kshardctl plan: invalid JSON: ", 0), 0u) << r.err;
}

TEST(KshardctlBinaryTest, UnknownCommandExitsWithTwo) {
  const RunResult r = runBinary({"frobnicate"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kshard::tools
