#include "operator/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

struct Parsed {
  StatusOr<OptionSet::Outcome> outcome = Status(StatusCode::kInternal, "not run");
  OperatorConfig config;
  std::string usage;
};

Parsed parse(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  Parsed p;
  OptionSet opts("kshard-operator", "The Shard Manager.");
  p.config.declare(opts);
  std::vector<const char*> argv{"kshard-operator"};
  for (const auto& a : args) argv.push_back(a.c_str());
  p.outcome = opts.parse(static_cast<int>(argv.size()), argv.data(),
                         [env](const std::string& name) -> std::optional<std::string> {
                           auto it = env.find(name);
                           if (it == env.end()) return std::nullopt;
                           return it->second;
                         });
  p.usage = opts.usage();
  return p;
}

const std::map<std::string, std::string> kPodEnv{{"POD_NAME", "kshard-operator-7c9-x2"},
                                                 {"POD_NAMESPACE", "kshard"},
                                                 {"POD_IP", "10.1.0.7"},
                                                 {"POD_SERVICE_ACCOUNT", "kshard"}};

TEST(OperatorConfig, IdentityComesFromTheDownwardApiAndDerivesTheAdvertisedAddress) {
  auto p = parse({}, kPodEnv);
  ASSERT_TRUE(p.outcome.ok()) << p.outcome.status().toString();
  ASSERT_TRUE(p.config.finalize().ok());
  EXPECT_EQ(p.config.podName, "kshard-operator-7c9-x2");
  EXPECT_EQ(p.config.advertiseAddress, "10.1.0.7:7200");
  EXPECT_EQ(p.config.leaseNamespace, "kshard");
  EXPECT_EQ(p.config.leaseDuration, 15s);
  EXPECT_EQ(p.config.renewDeadline, 10s);
  EXPECT_EQ(p.config.retryPeriod, 2s);
}

TEST(OperatorConfig, FlagsOverrideTheFileWhichOverridesDefaults) {
  const std::string path = ::testing::TempDir() + "/operator-config.yaml";
  {
    std::ofstream f(path);
    f << "manager-listen: 0.0.0.0:7300\nlease-duration: 30s\ndefault-shards: 600\n"
         "create-shard-maps: false\n";
  }
  auto p = parse({"--config", path, "--lease-duration=20s"}, kPodEnv);
  ASSERT_TRUE(p.outcome.ok()) << p.outcome.status().toString();
  ASSERT_TRUE(p.config.finalize().ok());
  EXPECT_EQ(p.config.managerListen, "0.0.0.0:7300");
  EXPECT_EQ(p.config.advertiseAddress, "10.1.0.7:7300");
  EXPECT_EQ(p.config.leaseDuration, 20s);
  EXPECT_EQ(p.config.defaultShards, 600);
  EXPECT_FALSE(p.config.createShardMaps);
  std::remove(path.c_str());
}

TEST(OperatorConfig, BadValuesNameTheOption) {
  auto zero = parse({"--retry-period=0s"}, kPodEnv);
  ASSERT_FALSE(zero.outcome.ok());
  EXPECT_NE(zero.outcome.status().message().find("retry-period"), std::string::npos);
  auto shards = parse({"--default-shards=100001"}, kPodEnv);
  ASSERT_FALSE(shards.outcome.ok());
  EXPECT_NE(shards.outcome.status().message().find("default-shards"), std::string::npos);
}

TEST(OperatorConfig, FinalizeChecksConsistency) {
  auto order = parse({"--renew-deadline=20s"}, kPodEnv);
  ASSERT_TRUE(order.outcome.ok());
  Status s = order.config.finalize();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("renew-deadline"), std::string::npos) << s.toString();

  auto noName = parse({}, {{"POD_NAMESPACE", "kshard"}, {"POD_IP", "10.1.0.7"}});
  ASSERT_TRUE(noName.outcome.ok());
  EXPECT_NE(noName.config.finalize().message().find("pod-name"), std::string::npos);

  auto noIp = parse(
      {}, {{"POD_NAME", "op"}, {"POD_NAMESPACE", "kshard"}, {"POD_SERVICE_ACCOUNT", "kshard"}});
  ASSERT_TRUE(noIp.outcome.ok());
  EXPECT_NE(noIp.config.finalize().message().find("advertise-address"), std::string::npos);

  auto badListen = parse({"--admin-listen=nowhere"}, kPodEnv);
  ASSERT_TRUE(badListen.outcome.ok());
  EXPECT_NE(badListen.config.finalize().message().find("admin-listen"), std::string::npos);
}

// Issue 29: the operator sent its own projected token to every pod. It now mints per-map tokens
// from its ServiceAccount by default, and says so when it does not know which that is.
TEST(OperatorConfig, SidecarTokensComeFromTheOperatorsOwnServiceAccountByDefault) {
  auto p = parse({}, kPodEnv);
  ASSERT_TRUE(p.outcome.ok());
  ASSERT_TRUE(p.config.finalize().ok());
  EXPECT_EQ(p.config.sidecarAuth, "tokenrequest");
  EXPECT_EQ(p.config.serviceAccount, "kshard");
  EXPECT_EQ(p.config.sidecarTokenLifetime, 20min);

  auto env = kPodEnv;
  env.erase("POD_SERVICE_ACCOUNT");
  auto unknown = parse({}, env);
  ASSERT_TRUE(unknown.outcome.ok());
  const Status s = unknown.config.finalize();
  EXPECT_NE(s.message().find("--service-account"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("--sidecar-auth=none"), std::string::npos) << s.toString();
  auto none = parse({"--sidecar-auth=none"}, env);
  ASSERT_TRUE(none.outcome.ok());
  EXPECT_TRUE(none.config.finalize().ok());

  auto shortLived = parse({"--sidecar-token-lifetime=5m"}, kPodEnv);
  ASSERT_FALSE(shortLived.outcome.ok());
  EXPECT_NE(shortLived.outcome.status().message().find("sidecar-token-lifetime"),
            std::string::npos);
}

TEST(OperatorConfig, HelpListsEveryOption) {
  auto p = parse({"--help"}, kPodEnv);
  ASSERT_TRUE(p.outcome.ok());
  EXPECT_EQ(*p.outcome, OptionSet::Outcome::kHelp);
  for (const char* flag :
       {"--pod-name", "--manager-listen", "--advertise-address", "--admin-listen",
        "--lease-duration", "--renew-deadline", "--retry-period", "--create-shard-maps",
        "--default-shards", "--manage-rbac", "--webhook-listen", "--kubeconfig", "--seed",
        "--log-level"}) {
    EXPECT_NE(p.usage.find(flag), std::string::npos) << flag;
  }
}

TEST(SplitHostPort, AcceptsHostsAndBracketedV6) {
  auto a = splitHostPort("10.1.0.7:7200");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "10.1.0.7");
  EXPECT_EQ(a->second, 7200);
  auto b = splitHostPort("[fd00::7]:7101");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, "fd00::7");
  EXPECT_EQ(splitHostPort(":7202")->first, "0.0.0.0");
  EXPECT_FALSE(splitHostPort("host").ok());
  EXPECT_FALSE(splitHostPort("host:0").ok());
  EXPECT_FALSE(splitHostPort("host:70000").ok());
  EXPECT_FALSE(splitHostPort("host:12a").ok());
}

}  // namespace
}  // namespace kshard::manager
