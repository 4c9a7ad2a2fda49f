// `kshardctl owner`, `map` and `top` (the kubectl plugin's commands) against an in-memory API
// server holding a ShardMap.
#include "tools/shard_map_commands.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "sharding/shard_id.h"
#include "tests/kube/fake_api_server.h"

namespace kshard::tools {
namespace {

using nlohmann::json;

// demo/counter: 10 shards; p1 (1.0.0) owns 1-5 at epoch 3, p2 (2.0.0) owns 6-9 at epoch 4, shard
// 10 is unassigned.
json counterMap() {
  return {{"apiVersion", "kshard.io/v1alpha1"},
          {"kind", "ShardMap"},
          {"metadata", {{"name", "counter"}, {"namespace", "demo"}}},
          {"spec", {{"shards", 10}}},
          {"status",
           {{"epoch", 4},
            {"pods",
             {{{"name", "p1"},
               {"uid", "u1"},
               {"address", "10.0.0.1:7101"},
               {"version", "1.0.0"},
               {"shards", 5}},
              {{"name", "p2"},
               {"uid", "u2"},
               {"address", "10.0.0.2:7101"},
               {"version", "2.0.0"},
               {"shards", 4}}}},
            {"assignments",
             {{{"pod", "p1"}, {"epoch", 3}, {"shards", "1-5"}},
              {{"pod", "p2"}, {"epoch", 4}, {"shards", "6-9"}}}},
            {"unassigned", "10"},
            {"podCount", 2},
            {"unassignedCount", 1}}}};
}

// counterMap() with measured load, balancing by load: p1 0.3, p2 0.9 (shards 7 and 6 the
// hottest), p3 registered but not measured yet.
json loadedMap() {
  json m = counterMap();
  m["spec"]["balance"] = "load";
  m["spec"]["loadTolerance"] = 0.25;
  m["status"]["pods"][0]["load"] = 0.3;
  m["status"]["pods"][1]["load"] = 0.9;
  m["status"]["pods"].push_back({{"name", "p3"}, {"version", "2.0.0"}});
  m["status"]["podCount"] = 3;
  m["status"]["load"] = {{"peakToMean", 1.5},
                         {"bound", 1.05},
                         {"total", 1.2},
                         {"hottest",
                          {{{"shard", 6}, {"pod", "p2"}, {"load", 0.35}},
                           {{"shard", 7}, {"pod", "p2"}, {"load", 0.4}},
                           {{"shard", 2}, {"pod", "p1"}, {"load", 0.1}}}}};
  return m;
}

// The words of each line of `text`.
std::vector<std::vector<std::string>> wordsOfLines(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    out.emplace_back();
    for (std::string w; in >> w;) out.back().push_back(w);
  }
  return out;
}

class ShardMapCommandsTest : public ::testing::Test {
 protected:
  ShardMapCommandsTest() {
    kube::ClientOptions o;
    o.qps = 0;
    o.maxRetries = 0;
    api_ = std::make_unique<kube::Client>(server_, scheduler_, random_, logger_, o);
    server_.put(kube::resources::kShardMaps, counterMap());
  }

  struct Run {
    int exitCode;
    std::string out;
    std::string err;
  };
  Run owner(std::vector<std::string> args, const std::string& ns = "default") {
    return run(&runOwnerWith, std::move(args), ns);
  }
  Run map(std::vector<std::string> args, const std::string& ns = "default") {
    return run(&runMapWith, std::move(args), ns);
  }
  Run top(std::vector<std::string> args, const std::string& ns = "default") {
    return run(&runTopWith, std::move(args), ns);
  }

  ManualScheduler scheduler_;
  kube::testing::FakeApiServer server_{scheduler_.clock()};
  SeededRandom random_{1};
  Logger logger_{"kshardctl-test", LogLevel::kError, [](std::string_view) {}};
  std::unique_ptr<kube::Client> api_;

 private:
  using Runner = int (*)(std::span<const std::string>, CommandIo&, kube::Client&,
                         const std::string&);
  Run run(Runner runner, std::vector<std::string> args, const std::string& ns) {
    std::istringstream in;
    std::ostringstream out;
    std::ostringstream err;
    CommandIo io{in, out, err};
    const int code = runner(args, io, *api_, ns);
    return {code, out.str(), err.str()};
  }
};

// An id whose shard is `want` among 10.
std::string idOnShard(sharding::ShardId want) {
  for (int i = 0;; ++i) {
    const std::string id = "user-" + std::to_string(i);
    if (*sharding::shardIdOf(id, 10) == want) return id;
  }
}

TEST_F(ShardMapCommandsTest, OwnerNamesEachEntitysShardPodVersionAndEpoch) {
  const std::string a = idOnShard(2);
  const std::string b = idOnShard(7);
  const std::string c = idOnShard(10);
  const Run r = owner({"-n", "demo", "counter", a, b, c});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  std::istringstream lines(r.out);
  std::string header, rowA, rowB, rowC;
  std::getline(lines, header);
  std::getline(lines, rowA);
  std::getline(lines, rowB);
  std::getline(lines, rowC);
  EXPECT_EQ(header.rfind("ENTITY", 0), 0u) << r.out;
  const auto words = [](const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  };
  EXPECT_EQ(words(rowA), (std::vector<std::string>{a, "2", "p1", "1.0.0", "3"}));
  EXPECT_EQ(words(rowB), (std::vector<std::string>{b, "7", "p2", "2.0.0", "4"}));
  EXPECT_EQ(words(rowC), (std::vector<std::string>{c, "10", "<unassigned>", "-", "-"}));
}

TEST_F(ShardMapCommandsTest, TheShardMapMayBeNamedWithItsNamespaceOrTakeTheDefaultOne) {
  EXPECT_EQ(owner({"demo/counter", "x"}).exitCode, kExitOk);
  EXPECT_EQ(owner({"counter", "x"}, "demo").exitCode, kExitOk);
  EXPECT_EQ(owner({"--namespace=demo", "counter", "x"}).exitCode, kExitOk);
}

TEST_F(ShardMapCommandsTest, MapListsThePodsInRegistrationOrderAndTheUnassignedShards) {
  const Run r = map({"demo/counter"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.out.find("demo/counter: 10 shards, epoch 4"), std::string::npos) << r.out;
  const std::size_t p1 = r.out.find("p1  ");
  const std::size_t p2 = r.out.find("p2  ");
  ASSERT_NE(p1, std::string::npos) << r.out;
  ASSERT_NE(p2, std::string::npos) << r.out;
  EXPECT_LT(p1, p2);
  EXPECT_NE(r.out.find("1-5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6-9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<unassigned>"), std::string::npos) << r.out;
}

TEST_F(ShardMapCommandsTest, AMissingShardMapFailsWithTheApiServersAnswer) {
  const Run r = map({"demo/nothing"});
  EXPECT_EQ(r.exitCode, kExitFailure);
  EXPECT_NE(r.err.find("demo/nothing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NotFound"), std::string::npos) << r.err;
}

TEST_F(ShardMapCommandsTest, BadArgumentsExitTwoWithOneLine) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{},
                                               {"demo/counter"},
                                               {"--bogus", "demo/counter", "x"},
                                               {"demo/counter", std::string("\xff")},
                                               {"-n"}}) {
    const Run r = owner(args);
    EXPECT_EQ(r.exitCode, kExitUsage) << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(map({"demo/counter", "demo/other"}).exitCode, kExitUsage);
}

TEST_F(ShardMapCommandsTest, AStatusWithTwoOwnersForAShardIsReportedNotShown) {
  json broken = counterMap();
  broken["status"]["assignments"][1]["shards"] = "5-9";
  server_.put(kube::resources::kShardMaps, broken);
  const Run r = owner({"demo/counter", "x"});
  EXPECT_EQ(r.exitCode, kExitFailure);
  EXPECT_NE(r.err.find("inconsistent status"), std::string::npos) << r.err;
  EXPECT_EQ(map({"demo/counter"}).exitCode, kExitFailure);
}

TEST_F(ShardMapCommandsTest, TopPodsListsThePodsBusiestFirstAndUnmeasuredOnesLast) {
  server_.put(kube::resources::kShardMaps, loadedMap());
  const Run r = top({"pods", "-n", "demo", "counter"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  const auto lines = wordsOfLines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_EQ(r.out.rfind("demo/counter: balance load, peak-to-mean 1.50 (tolerance 1.25, "
                        "hottest-shard bound 1.05), total load 1.200\n",
                        0),
            0u)
      << r.out;
  EXPECT_EQ(lines[1], (std::vector<std::string>{"NAME", "SHARDS", "LOAD", "SHARE"}));
  EXPECT_EQ(lines[2], (std::vector<std::string>{"p2", "4", "0.900", "75.0%"}));
  EXPECT_EQ(lines[3], (std::vector<std::string>{"p1", "5", "0.300", "25.0%"}));
  EXPECT_EQ(lines[4], (std::vector<std::string>{"p3", "0", "-", "-"}));
}

TEST_F(ShardMapCommandsTest, TopNamesTheToleranceOnlyWhenBalancingByLoad) {
  json m = loadedMap();
  m["spec"]["balance"] = "count";
  server_.put(kube::resources::kShardMaps, m);
  const Run r = top({"pods", "demo/counter"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_EQ(r.out.rfind("demo/counter: balance count, peak-to-mean 1.50 (hottest-shard bound "
                        "1.05), total load 1.200\n",
                        0),
            0u)
      << r.out;
}

TEST_F(ShardMapCommandsTest, TopShardsListsTheHottestShardsBusiestFirst) {
  server_.put(kube::resources::kShardMaps, loadedMap());
  const Run r = top({"shards", "demo/counter"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.out.find("the status keeps only the 10 hottest"), std::string::npos) << r.out;
  const auto lines = wordsOfLines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_EQ(lines[2], (std::vector<std::string>{"SHARD", "POD", "LOAD", "SHARE"}));
  EXPECT_EQ(lines[3], (std::vector<std::string>{"7", "p2", "0.400", "33.3%"}));
  EXPECT_EQ(lines[4], (std::vector<std::string>{"6", "p2", "0.350", "29.2%"}));
  EXPECT_EQ(lines[5], (std::vector<std::string>{"2", "p1", "0.100", "8.3%"}));
}

TEST_F(ShardMapCommandsTest, TopSaysWhenThePodsHaveNotReportedLoadYet) {
  // counterMap() has no status.load and no pod load.
  const Run pods = top({"pods", "demo/counter"});
  ASSERT_EQ(pods.exitCode, kExitOk) << pods.err;
  EXPECT_EQ(pods.err, "");
  EXPECT_EQ(pods.out.rfind("demo/counter: balance count; the pods have not reported their load "
                           "yet (no status.load)\n",
                           0),
            0u)
      << pods.out;
  const auto lines = wordsOfLines(pods.out);
  ASSERT_EQ(lines.size(), 4u) << pods.out;
  EXPECT_EQ(lines[2], (std::vector<std::string>{"p1", "5", "-", "-"}));
  EXPECT_EQ(lines[3], (std::vector<std::string>{"p2", "4", "-", "-"}));
  const Run shards = top({"shards", "demo/counter"});
  ASSERT_EQ(shards.exitCode, kExitOk) << shards.err;
  EXPECT_EQ(shards.out,
            "demo/counter: balance count; the pods have not reported their load yet (no "
            "status.load)\n");
}

TEST_F(ShardMapCommandsTest, TopShardsSaysWhenNoShardWasMeasuredBusy) {
  json m = loadedMap();
  m["status"]["load"]["hottest"] = json::array();
  server_.put(kube::resources::kShardMaps, m);
  const Run r = top({"shards", "demo/counter"});
  ASSERT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.out.find("\nno shard has measured any load\n"), std::string::npos) << r.out;
}

TEST_F(ShardMapCommandsTest, TopRejectsAMissingOrUnknownSubcommandWithOneLine) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{},
                                               {"demo/counter"},
                                               {"-n", "demo", "pods", "counter"},
                                               {"pod", "demo/counter"}}) {
    const Run r = top(args);
    EXPECT_EQ(r.exitCode, kExitUsage) << r.out;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kshardctl top: ", 0), 0u) << r.err;
  }
  EXPECT_EQ(top({"pod", "demo/counter"}).err,
            "kshardctl top: unknown subcommand \"pod\" (top pods or top shards)\n");
}

TEST_F(ShardMapCommandsTest, TopRejectsBadArgumentsAndReportsAMissingShardMap) {
  EXPECT_EQ(top({"pods"}).err, "kshardctl top pods: no ShardMap named\n");
  EXPECT_EQ(top({"shards", "--bogus", "demo/counter"}).exitCode, kExitUsage);
  EXPECT_EQ(top({"pods", "demo/counter", "demo/other"}).exitCode, kExitUsage);
  const Run missing = top({"shards", "demo/nothing"});
  EXPECT_EQ(missing.exitCode, kExitFailure);
  EXPECT_EQ(missing.err.rfind("kshardctl top shards: ", 0), 0u) << missing.err;
  EXPECT_NE(missing.err.find("NotFound"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace kshard::tools
