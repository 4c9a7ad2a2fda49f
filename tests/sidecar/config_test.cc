// sidecar/config.h: the cross-field checks of the peer API's authentication options.
#include "sidecar/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kshard::sidecar {
namespace {

// Identity only, with the peer API's authentication turned off on purpose.
SidecarConfig valid() {
  SidecarConfig c;
  c.podName = "counter-0";
  c.podNamespace = "demo";
  c.podUid = "uid-0";
  c.podIp = "10.0.0.1";
  c.shardMap = "counter";
  c.peerAuth = "none";
  return c;
}

SidecarConfig withTokenAuth() {
  SidecarConfig c = valid();
  c.peerAuth = "token";
  c.operatorIdentity = "system:serviceaccount:kshard-system:kshard";
  c.managerTokenFile = "/var/run/secrets/kshard.io/token/operator";
  c.peerTokenFile = "/var/run/secrets/kshard.io/token/peer";
  return c;
}

std::string errorOf(const SidecarConfig& c) { return c.validate().message(); }

TEST(SidecarConfig, PeerAuthIsTokenOrNone) {
  EXPECT_TRUE(valid().validate().ok());
  EXPECT_TRUE(withTokenAuth().validate().ok()) << errorOf(withTokenAuth());
  SidecarConfig c = valid();
  c.peerAuth = "maybe";
  EXPECT_EQ(errorOf(c), "--peer-auth: must be token or none");
}

TEST(SidecarConfig, PeerTransportIsChannelByDefaultOrHttp) {
  EXPECT_EQ(valid().peerTransport, "channel");
  SidecarConfig c = valid();
  c.peerTransport = "http";
  EXPECT_TRUE(c.validate().ok()) << errorOf(c);
  c.peerTransport = "grpc";
  EXPECT_EQ(errorOf(c), "--peer-transport: must be channel or http");
}

TEST(SidecarConfig, TokenAuthNeedsTheOperatorsIdentityAndThePodsToken) {
  for (const std::string bad : {"", "kshard", "system:serviceaccount:kshard-system",
                                "system:serviceaccount:Kshard:kshard", "system:node:kshard"}) {
    SidecarConfig c = withTokenAuth();
    c.operatorIdentity = bad;
    EXPECT_NE(errorOf(c).find("--operator-identity"), std::string::npos) << bad;
  }
  SidecarConfig c = withTokenAuth();
  c.peerTokenFile.clear();
  EXPECT_NE(errorOf(c).find("--peer-token-file: required"), std::string::npos) << errorOf(c);
}

// Issue 29: the binary accepted every caller of the peer API unless told otherwise.
TEST(SidecarConfig, PeerAuthIsTokenByDefaultAndSaysWhatIsMissing) {
  SidecarConfig c = valid();
  c.peerAuth = SidecarConfig{}.peerAuth;
  EXPECT_EQ(c.peerAuth, "token");
  const std::string error = errorOf(c);
  EXPECT_NE(error.find("--operator-identity"), std::string::npos) << error;
  EXPECT_NE(error.find("--peer-auth=none"), std::string::npos)
      << "the error does not say how to turn it off: " << error;
}

TEST(SidecarConfig, TokenAuthWithoutTheApiNeedsAKeysFileAndItsIssuer) {
  SidecarConfig c = withTokenAuth();
  c.mapSource = "manager";
  c.managerAddress = "127.0.0.1:7000";
  EXPECT_NE(errorOf(c).find("--issuer-keys-file"), std::string::npos) << errorOf(c);
  c.issuerKeysFile = "/etc/kshard/jwks.json";
  EXPECT_EQ(errorOf(c), "--issuer: required with --issuer-keys-file");
  c.issuer = "https://kubernetes.default.svc.cluster.local";
  EXPECT_TRUE(c.validate().ok()) << errorOf(c);
}

TEST(SidecarConfig, MaxConcurrentStopsComesFromItsFlagOrEnvironmentAndIsAtLeastOne) {
  auto parse = [](std::vector<std::string> args, std::map<std::string, std::string> env) {
    SidecarConfig c;
    OptionSet opts("kshard-sidecar", "test");
    c.declare(opts);
    std::vector<const char*> argv{"kshard-sidecar"};
    for (const auto& a : args) argv.push_back(a.c_str());
    Status st = opts.parse(static_cast<int>(argv.size()), argv.data(),
                           [env](const std::string& name) -> std::optional<std::string> {
                             auto it = env.find(name);
                             if (it == env.end()) return std::nullopt;
                             return it->second;
                           })
                    .status();
    return std::make_pair(st, c.maxConcurrentStops);
  };
  EXPECT_EQ(parse({}, {}).second, 64);
  EXPECT_EQ(parse({"--max-concurrent-stops=8"}, {}).second, 8);
  EXPECT_EQ(parse({}, {{"KSHARD_MAX_CONCURRENT_STOPS", "512"}}).second, 512);
  const Status zero = parse({"--max-concurrent-stops=0"}, {}).first;
  EXPECT_FALSE(zero.ok());
  EXPECT_NE(zero.message().find("max-concurrent-stops"), std::string::npos) << zero.toString();
}

}  // namespace
}  // namespace kshard::sidecar
