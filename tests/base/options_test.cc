#include "base/options.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

namespace kshard {
namespace {

struct Config {
  std::string shardMap = "default";
  std::int64_t appPort = 8080;
  bool verbose = false;
  double rate = 0.5;
};

class OptionSetTest : public ::testing::Test {
 protected:
  OptionSetTest() : opts_("prog", "Test program.") {
    opts_.addString("shard-map", "KSHARD_SHARD_MAP", "The map.", &cfg_.shardMap);
    opts_.addInt("app-port", "KSHARD_APP_PORT", "The port.", &cfg_.appPort, 1, 65535);
    opts_.addBool("verbose", "", "Talk.", &cfg_.verbose);
    opts_.addDouble("rate", "", "A rate.", &cfg_.rate, 0.0, 1.0);
  }
  StatusOr<OptionSet::Outcome> parse(std::vector<const char*> args) {
    args.insert(args.begin(), "prog");
    return opts_.parse(static_cast<int>(args.size()), args.data(),
                       [this](const std::string& n) -> std::optional<std::string> {
                         auto it = env_.find(n);
                         if (it == env_.end()) return std::nullopt;
                         return it->second;
                       });
  }
  std::string writeYaml(const std::string& text) {
    // One file per test: ctest runs the tests of this fixture in parallel processes.
    const std::string path = ::testing::TempDir() + "/options_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                             ".yaml";
    std::ofstream(path) << text;
    return path;
  }

  Config cfg_;
  OptionSet opts_;
  std::map<std::string, std::string> env_;
};

TEST_F(OptionSetTest, DefaultsStayWithoutSources) {
  ASSERT_TRUE(parse({}).ok());
  EXPECT_EQ(cfg_.shardMap, "default");
  EXPECT_EQ(cfg_.appPort, 8080);
}

TEST_F(OptionSetTest, FlagsInBothFormsAndBareBools) {
  auto r = parse({"--shard-map=counter", "--app-port", "9090", "--verbose", "--rate=0.25"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(*r, OptionSet::Outcome::kRun);
  EXPECT_EQ(cfg_.shardMap, "counter");
  EXPECT_EQ(cfg_.appPort, 9090);
  EXPECT_TRUE(cfg_.verbose);
  EXPECT_DOUBLE_EQ(cfg_.rate, 0.25);
}

TEST_F(OptionSetTest, PrecedenceIsFlagsThenEnvThenFileThenDefaults) {
  const auto path = writeYaml("shard-map: from-file\napp-port: 1000\nrate: 0.1\n");
  env_["KSHARD_APP_PORT"] = "2000";
  std::string config = "--config=" + path;
  ASSERT_TRUE(parse({config.c_str(), "--rate=0.3"}).ok());
  EXPECT_EQ(cfg_.shardMap, "from-file");
  EXPECT_EQ(cfg_.appPort, 2000);
  EXPECT_DOUBLE_EQ(cfg_.rate, 0.3);
}

TEST_F(OptionSetTest, ErrorsNameTheirSourceAndOption) {
  EXPECT_EQ(parse({"--app-port=x"}).status().message(),
            "--app-port: must be an integer in 1..65535, got \"x\"");
  EXPECT_EQ(parse({"--nope"}).status().message(), "unknown flag --nope (see --help)");
  EXPECT_EQ(parse({"stray"}).status().message(), "unexpected argument \"stray\" (see --help)");
  EXPECT_EQ(parse({"--app-port"}).status().message(), "--app-port: needs a value");
  env_["KSHARD_APP_PORT"] = "0";
  EXPECT_EQ(parse({}).status().message(),
            "env KSHARD_APP_PORT: must be an integer in 1..65535, got \"0\"");
  env_.clear();
  const auto path = writeYaml("unknown: 1\n");
  std::string config = "--config=" + path;
  EXPECT_EQ(parse({config.c_str()}).status().message(),
            "config " + path + ": unknown option \"unknown\"");
  const auto bad = writeYaml("app-port: [1]\n");
  EXPECT_EQ(parse({config.c_str()}).status().message(),
            "config " + bad + ": app-port: must be a scalar");
  EXPECT_EQ(parse({"--config=/nonexistent.yaml"}).status().message(),
            "config /nonexistent.yaml: cannot be read");
}

TEST_F(OptionSetTest, HelpIsAnOutcomeAndListsEveryOption) {
  auto r = parse({"--help"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, OptionSet::Outcome::kHelp);
  const std::string u = opts_.usage();
  for (const char* name : {"--config", "--shard-map", "$KSHARD_SHARD_MAP", "--app-port",
                           "default 8080", "--verbose", "--rate"}) {
    EXPECT_NE(u.find(name), std::string::npos) << name;
  }
}

// A row of a table declares what the add call of its target's kind declares.
TEST_F(OptionSetTest, TableRowsDeclareWhatTheAddCallsOfTheirTargetsDo) {
  Config table;
  std::string custom;
  OptionSet fromTable("prog", "Test program.");
  fromTable.addAll({
      {"shard-map", "KSHARD_SHARD_MAP", "The map.", &table.shardMap},
      {"app-port", "KSHARD_APP_PORT", "The port.", IntOption{&table.appPort, 1, 65535}},
      {"verbose", "", "Talk.", &table.verbose},
      {"rate", "", "A rate.", DoubleOption{&table.rate, 0.0, 1.0}},
  });
  EXPECT_EQ(fromTable.usage(), opts_.usage());
  fromTable.addAll({{"name", "", "Shouted.", CustomOption{"NONE", [&custom](std::string_view v) {
                                                            custom = std::string(v) + "!";
                                                            return Status{};
                                                          }}}});
  EXPECT_NE(fromTable.usage().find("--name (default NONE)"), std::string::npos);
  const char* argv[] = {"prog",      "--shard-map=counter", "--app-port=9090",
                        "--verbose", "--rate=0.25",         "--name=x"};
  auto r = fromTable.parse(6, argv, [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(table.shardMap, "counter");
  EXPECT_EQ(table.appPort, 9090);
  EXPECT_TRUE(table.verbose);
  EXPECT_DOUBLE_EQ(table.rate, 0.25);
  EXPECT_EQ(custom, "x!");
  const char* bad[] = {"prog", "--app-port=0"};
  EXPECT_EQ(
      fromTable.parse(2, bad, [](const std::string&) { return std::nullopt; }).status().message(),
      "--app-port: must be an integer in 1..65535, got \"0\"");
}

}  // namespace
}  // namespace kshard
