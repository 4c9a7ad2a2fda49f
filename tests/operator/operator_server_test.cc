// OperatorServer against the fake API server: readiness before and after start, leadership and
// its release on drain, and stop.
#include "operator/operator_server.h"

#include <gtest/gtest.h>

#include "http/factory.h"
#include "kube/resource.h"
#include "tests/kube/fake_api_server.h"
#include "tests/support/get_status.h"
#include "tests/support/subprocess.h"

namespace kshard::manager {
namespace {

using kshard::testing::freeLoopbackPort;
using kshard::testing::waitFor;
using std::chrono::seconds;

class OperatorServerTest : public ::testing::Test {
 protected:
  OperatorServerTest() : api_(SystemClock::instance()) {
    cfg_.podName = "operator-0";
    cfg_.podNamespace = "kshard-system";
    cfg_.podIp = "127.0.0.1";
    cfg_.serviceAccount = "kshard";
    cfg_.adminListen = "127.0.0.1:" + std::to_string(freeLoopbackPort());
    cfg_.managerListen = "127.0.0.1:" + std::to_string(freeLoopbackPort());
    cfg_.podAuth = "none";
    cfg_.retryPeriod = std::chrono::milliseconds(100);
    cfg_.seed = 7;
    EXPECT_TRUE(cfg_.finalize().ok());
    http::ClientOptions o;
    o.baseUrl = "http://" + cfg_.adminListen;
    admin_ = std::move(*http::makeClient(http::Backend::kBeast, o));
  }

  std::unique_ptr<OperatorServer> build() {
    auto server =
        OperatorServer::build(cfg_, Logger("operator", LogLevel::kWarn), {api_, nullptr, ""});
    EXPECT_TRUE(server.ok()) << server.status().toString();
    return server.ok() ? std::move(*server) : nullptr;
  }
  // /readyz's status code, or 0 when the admin port does not answer.
  int readyz() { return kshard::testing::getStatus(*admin_, "/readyz"); }
  std::string leaseHolder() {
    auto lease = api_.get(kube::resources::kLeases, cfg_.leaseNamespace, cfg_.leaseName);
    if (!lease) return "";
    return (*lease)["spec"].value("holderIdentity", "");
  }

  kube::testing::FakeApiServer api_;
  OperatorConfig cfg_;
  std::unique_ptr<http::Client> admin_;
};

TEST_F(OperatorServerTest, NotReadyBeforeStartAndReadyOnceSyncedAndServing) {
  auto server = build();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->notReadyReason(), "the ShardMap informer has not synced");
  EXPECT_FALSE(server->synced());
  EXPECT_EQ(readyz(), 0) << "nothing listens before start()";

  ASSERT_TRUE(server->start(seconds(10)).ok());
  EXPECT_TRUE(server->synced());
  EXPECT_EQ(server->notReadyReason(), "");
  EXPECT_EQ(readyz(), 200);
  server->drain();
  server->stop();
}

TEST_F(OperatorServerTest, LeadsOnceElectedAndReleasesTheLeaseOnDrain) {
  auto server = build();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->start(seconds(10)).ok());
  ASSERT_TRUE(server->joinElection().ok());
  ASSERT_TRUE(waitFor([&] { return leaseHolder() == "operator-0"; }, seconds(10)));

  server->drain();
  EXPECT_EQ(leaseHolder(), "") << "a successor need not wait for the Lease to expire";
  server->stop();
  EXPECT_EQ(readyz(), 0) << "the admin server is closed";
}

TEST_F(OperatorServerTest, StartFailsWhenTheManagerPortIsTaken) {
  auto first = build();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->start(seconds(10)).ok());
  cfg_.adminListen = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  auto second = build();
  ASSERT_NE(second, nullptr);
  EXPECT_FALSE(second->start(seconds(10)).ok());
  second->stop();
  first->drain();
  first->stop();
}

TEST_F(OperatorServerTest, BuildRefusesTokenSidecarsWithoutOperatorCredentials) {
  cfg_.sidecarAuth = "none";  // the built-in injection configuration asks for peerAuth token
  auto server =
      OperatorServer::build(cfg_, Logger("operator", LogLevel::kError), {api_, nullptr, ""});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kshard::manager
