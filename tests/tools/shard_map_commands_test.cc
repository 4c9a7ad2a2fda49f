// `kshardctl owner` and `kshardctl map` (the kubectl plugin's commands) against an in-memory API
// server holding a ShardMap.
#include "tools/shard_map_commands.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kshard::tools
