#include "kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace kshard::kube {
namespace {

namespace fs = std::filesystem;

const std::string kCaPem = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n";
const std::string kKeyPem =
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQ\n-----END EC PRIVATE KEY-----\n";

std::string base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kshard-kube-config-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& rel, const std::string& content) {
    const fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
    return p.string();
  }

  Environment env() const {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }

  std::string kubeconfig(const std::string& userBlock, const std::string& clusterExtra = "") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
           "clusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:6443\n" +
           clusterExtra +
           "contexts:\n- name: dev\n  context:\n    cluster: local\n    user: admin\n"
           "    namespace: demo\n"
           "users:\n- name: admin\n  user:\n" +
           userBlock;
  }

  ManualClock clock_;
  std::string dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(ConfigTest, KubeconfigWithInlineDataAndToken) {
  const std::string path =
      write("kubeconfig", kubeconfig("    token: secret-token\n",
                                     "    certificate-authority-data: " + base64(kCaPem) + "\n"));
  auto c = kubeconfigConfig({path}, "", clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->baseUrl, "https://127.0.0.1:6443");
  EXPECT_EQ(c->pathPrefix, "");
  EXPECT_EQ(c->tls.caData, kCaPem);
  EXPECT_EQ(c->defaultNamespace, "demo");
  ASSERT_NE(c->token, nullptr);
  EXPECT_EQ(*c->token->token(), "secret-token");
  EXPECT_NE(c->source.find("context dev"), std::string::npos);
}

TEST_F(ConfigTest, RelativeFilePathsResolveAgainstTheKubeconfigDirectory) {
  write("conf/pki/ca.crt", kCaPem);
  write("conf/pki/admin.crt", kCaPem);
  write("conf/pki/admin.key", kKeyPem);
  const std::string path =
      write("conf/kubeconfig",
            kubeconfig("    client-certificate: pki/admin.crt\n    client-key: pki/admin.key\n",
                       "    certificate-authority: pki/ca.crt\n"));
  auto c = kubeconfigConfig({path}, "", clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->tls.caFile, dir_ + "/conf/pki/ca.crt");
  EXPECT_EQ(c->tls.certFile, dir_ + "/conf/pki/admin.crt");
  EXPECT_EQ(c->tls.keyFile, dir_ + "/conf/pki/admin.key");
  EXPECT_EQ(c->token, nullptr);
}

TEST_F(ConfigTest, BadBase64NamesTheFileAndTheField) {
  const std::string path = write(
      "kubeconfig", kubeconfig("    client-certificate-data: not*base64\n    client-key-data: " +
                               base64(kKeyPem) + "\n"));
  auto c = kubeconfigConfig({path}, "", clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "kubeconfig " + path + ": users[0].user.client-certificate-data: not valid base64");
}

TEST_F(ConfigTest, FieldErrorsAreSpecific) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::string ok = "    token: t\n";
  const Case cases[] = {
      {kubeconfig("    client-certificate-data: " + base64(kCaPem) + "\n"),
       "users[0].user: client-certificate without client-key"},
      {kubeconfig("    client-key: missing.key\n    client-certificate: missing.crt\n"),
       "users[0].user.client-certificate: cannot read"},
      {kubeconfig(ok, "    insecure-skip-tls-verify: maybe\n"),
       "clusters[0].cluster.insecure-skip-tls-verify: must be true or false"},
      {kubeconfig(ok, "    insecure-skip-tls-verify: true\n    certificate-authority-data: " +
                          base64(kCaPem) + "\n"),
       "cannot be combined with a certificate authority"},
      {kubeconfig("    exec:\n      command: aws\n"), "users[0].user.exec: not supported"},
      {kubeconfig(ok, "    certificate-authority-data: " + base64("hello") + "\n"),
       "clusters[0].cluster.certificate-authority-data: decoded data is not PEM"},
      {"clusters: {}\n", "clusters: must be a list"},
      {"clusters:\n- cluster: {server: https://x}\n", "clusters[0].name: missing"},
      {"current-context: dev\nclusters: []\n", "context \"dev\" not found"},
      {"clusters:\n- name: a\n  cluster: {server: https://x}\n", "current-context is not set"},
      {"current-context: dev\ncontexts:\n- name: dev\n  context: {cluster: nope}\n",
       "contexts[0].context.cluster: no cluster named \"nope\""},
      {"current-context: dev\nclusters:\n- name: a\n  cluster: {server: 'ftp://x'}\n"
       "contexts:\n- name: dev\n  context: {cluster: a}\n",
       "clusters[0].cluster.server: server \"ftp://x\": scheme must be https or http"},
      {"clusters: [\n", "not valid YAML at line"},
  };
  for (const auto& tc : cases) {
    const std::string path = write("kubeconfig", tc.text);
    auto c = kubeconfigConfig({path}, "", clock_);
    ASSERT_FALSE(c.ok()) << tc.text;
    EXPECT_NE(c.status().message().find(tc.expected), std::string::npos)
        << c.status().message() << "\nexpected: " << tc.expected;
    EXPECT_EQ(c.status().message().rfind("kubeconfig " + path, 0), 0u) << c.status().message();
  }
}

TEST_F(ConfigTest, ContextOverrideAndServerPathPrefix) {
  const std::string path = write(
      "kubeconfig",
      "current-context: a\n"
      "clusters:\n- name: ca\n  cluster: {server: 'https://a:6443'}\n"
      "- name: cb\n  cluster: {server: 'https://proxy.example/k8s/clusters/c-1/'}\n"
      "contexts:\n- name: a\n  context: {cluster: ca}\n- name: b\n  context: {cluster: cb}\n");
  auto c = kubeconfigConfig({path}, "b", clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->baseUrl, "https://proxy.example");
  EXPECT_EQ(c->pathPrefix, "/k8s/clusters/c-1");
  EXPECT_EQ(c->defaultNamespace, "default");
}

TEST_F(ConfigTest, KubeconfigListIsMergedFirstDefinitionWins) {
  const std::string first =
      write("one",
            "current-context: dev\n"
            "clusters:\n- name: local\n  cluster: {server: 'https://first:1'}\n");
  const std::string second =
      write("two",
            "current-context: other\n"
            "clusters:\n- name: local\n  cluster: {server: 'https://second:2'}\n"
            "contexts:\n- name: dev\n  context: {cluster: local, user: u}\n"
            "users:\n- name: u\n  user: {token: from-second}\n");
  env_["KUBECONFIG"] = first + ":" + dir_ + "/missing:" + second;
  LoadOptions o;
  o.env = env();
  auto c = loadConfig(o, clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->baseUrl, "https://first:1");
  EXPECT_EQ(*c->token->token(), "from-second");
}

TEST_F(ConfigTest, ExplicitPathWinsOverTheEnvironment) {
  const std::string flag = write("flag", kubeconfig("    token: from-flag\n"));
  env_["KUBECONFIG"] = write("env", "garbage: [");
  env_["KUBERNETES_SERVICE_HOST"] = "10.0.0.1";
  LoadOptions o;
  o.kubeconfigPath = flag;
  o.env = env();
  auto c = loadConfig(o, clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(*c->token->token(), "from-flag");
}

TEST_F(ConfigTest, InClusterReadsTheServiceAccountDirectory) {
  write("sa/token", "tok-1\n");
  write("sa/ca.crt", kCaPem);
  write("sa/namespace", "kshard-system");
  env_["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  env_["KUBERNETES_SERVICE_PORT"] = "443";
  env_[kServiceAccountDirEnv] = dir_ + "/sa";
  LoadOptions o;
  o.env = env();
  auto c = loadConfig(o, clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->baseUrl, "https://[fd00::1]:443");
  EXPECT_EQ(c->tls.caFile, dir_ + "/sa/ca.crt");
  EXPECT_EQ(c->defaultNamespace, "kshard-system");
  EXPECT_EQ(*c->token->token(), "tok-1");
}

TEST_F(ConfigTest, InClusterTokenIsReReadWhenItRotates) {
  write("sa/token", "tok-1");
  write("sa/ca.crt", kCaPem);
  env_["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  env_["KUBERNETES_SERVICE_PORT"] = "443";
  env_[kServiceAccountDirEnv] = dir_ + "/sa";
  auto c = inClusterConfig(env(), clock_);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  write("sa/token", "tok-2");
  // Cached for a minute (client-go), then re-read.
  EXPECT_EQ(*c->token->token(), "tok-1");
  clock_.advance(std::chrono::seconds(60));
  EXPECT_EQ(*c->token->token(), "tok-2");
  // A 401 re-reads at once.
  write("sa/token", "tok-3");
  EXPECT_TRUE(c->token->onUnauthorized("tok-2"));
  EXPECT_EQ(*c->token->token(), "tok-3");
  EXPECT_FALSE(c->token->onUnauthorized("tok-3"));
}

TEST_F(ConfigTest, InClusterWithoutTheEnvironmentOrFilesSaysWhatIsMissing) {
  auto none = inClusterConfig(env(), clock_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);

  env_["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  env_["KUBERNETES_SERVICE_PORT"] = "443";
  env_[kServiceAccountDirEnv] = dir_ + "/nothing";
  auto noToken = inClusterConfig(env(), clock_);
  ASSERT_FALSE(noToken.ok());
  EXPECT_NE(noToken.status().message().find(dir_ + "/nothing/token"), std::string::npos)
      << noToken.status().message();
}

TEST_F(ConfigTest, NothingConfiguredIsNotFound) {
  env_["HOME"] = dir_;
  LoadOptions o;
  o.env = env();
  auto c = loadConfig(o, clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kshard::kube
