#include "tools/shard_of_command.h"

#include <gtest/gtest.h>

#include "tests/tools/kshardctl_runner.h"

namespace kshard::tools {
namespace {

TEST(ShardOfCommandTest, PrintsOneShardPerIdInOrder) {
  const RunResult r = runInProcess({"shard-of", "--shards", "300", "a", "guild1"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_EQ(r.out, "98\n95\n");
  EXPECT_EQ(r.err, "");
}

TEST(ShardOfCommandTest, AcceptsTheEqualsFormAndOptionsAfterIds) {
  EXPECT_EQ(runInProcess({"shard-of", "--shards=300", "a"}).out, "98\n");
  EXPECT_EQ(runInProcess({"shard-of", "polygenelubricants", "--shards", "1000"}).out, "649\n");
}

TEST(ShardOfCommandTest, IdsStartingWithADashGoAfterTheDoubleDash) {
  // "-x": hashCode 1515, so shard 1515 % 300 + 1 = 16 (computed with Java).
  const RunResult r = runInProcess({"shard-of", "--shards", "300", "--", "-x", "a"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_EQ(r.out, "16\n98\n");
  const RunResult bad = runInProcess({"shard-of", "--shards", "300", "-x"});
  EXPECT_EQ(bad.exitCode, kExitUsage);
  EXPECT_EQ(bad.err,
            "kshardctl shard-of: unknown option \"-x\" (ids starting with '-' go after --)\n");
}

TEST(ShardOfCommandTest, InvalidUtf8IdIsAUsageErrorWithNoPartialOutput) {
  const RunResult r = runInProcess({"shard-of", "--shards", "300", "a", "b\xC3"});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "kshardctl shard-of: id 2: invalid UTF-8 at byte 1\n");
}

TEST(ShardOfCommandTest, RejectsMissingOrBadShardCounts) {
  EXPECT_EQ(runInProcess({"shard-of", "a"}).err, "kshardctl shard-of: --shards N is required\n");
  EXPECT_EQ(runInProcess({"shard-of", "a", "--shards"}).err,
            "kshardctl shard-of: --shards needs a value\n");
  for (const char* n : {"0", "100001", "-3", "12x", "", "3.0"}) {
    const RunResult r = runInProcess({"shard-of", "--shards", n, "a"});
    EXPECT_EQ(r.exitCode, kExitUsage) << n;
    EXPECT_EQ(r.err, std::string("kshardctl shard-of: --shards must be an integer in 1..100000, "
                                 "not \"") +
                         n + "\"\n");
  }
  EXPECT_EQ(runInProcess({"shard-of", "--shards", "100000", "a"}).out, "98\n");
}

TEST(ShardOfCommandTest, RequiresAtLeastOneId) {
  const RunResult r = runInProcess({"shard-of", "--shards", "300"});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_EQ(r.err, "kshardctl shard-of: no entity ids given\n");
}

TEST(ShardOfCommandTest, HelpShowsTheUsage) {
  const RunResult r = runInProcess({"shard-of", "--help"});
  EXPECT_EQ(r.exitCode, kExitOk);
  EXPECT_EQ(r.out.rfind("Usage: kshardctl shard-of --shards N ID...", 0), 0u) << r.out;
}

}  // namespace
}  // namespace kshard::tools
