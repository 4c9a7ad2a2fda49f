#include "http/admin_routes.h"

#include <gtest/gtest.h>

#include <atomic>

#include "http/beast_server.h"
#include "http/factory.h"

namespace kshard::http {
namespace {

// A registry whose exposition is fixed text: the admin routes only relay it.
class FixedRegistry : public metrics::Registry {
 public:
  metrics::Family<metrics::Counter>& counter(const std::string&, const std::string&) override {
    std::abort();
  }
  metrics::Family<metrics::Gauge>& gauge(const std::string&, const std::string&) override {
    std::abort();
  }
  metrics::Family<metrics::Histogram>& histogram(const std::string&, const std::string&,
                                                 const std::vector<double>&) override {
    std::abort();
  }
  std::string exposition() const override { return text; }
  std::string text = "kshard_test_total 3\n";
};

TEST(AdminRoutesTest, ServesMetricsHealthAndReadiness) {
  FixedRegistry registry;
  std::atomic<bool> ready{false};
  BeastServer server(ServerOptions{});
  addAdminRoutes(server, registry, [&ready] {
    return ready ? std::string() : std::string("waiting for the shard map");
  });
  ASSERT_TRUE(server.start().ok());
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(server.port());
  auto client = makeClient(Backend::kBeast, o);
  ASSERT_TRUE(client.ok());
  auto get = [&](std::string target) {
    Request r;
    r.target = std::move(target);
    StatusOr<Response> res = (*client)->sendSync(std::move(r));
    EXPECT_TRUE(res.ok()) << res.status().toString();
    return res.valueOr(Response{});
  };

  const Response metrics = get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body, "kshard_test_total 3\n");
  EXPECT_TRUE(metrics.headers.get("Content-Type")->starts_with("text/plain; version=0.0.4"));
  EXPECT_EQ(get("/healthz").status, 200);

  const Response notReady = get("/readyz");
  EXPECT_EQ(notReady.status, 503);
  EXPECT_NE(notReady.body.find("waiting for the shard map"), std::string::npos);
  ready = true;
  EXPECT_EQ(get("/readyz").status, 200);
  server.stop();
}

TEST(AdminRoutesTest, RefreshRunsBeforeEveryExposition) {
  FixedRegistry registry;
  std::atomic<int> refreshes{0};
  BeastServer server(ServerOptions{});
  addAdminRoutes(
      server, registry, [] { return std::string(); },
      [&] { registry.text = "kshard_test_refreshes " + std::to_string(++refreshes) + "\n"; });
  ASSERT_TRUE(server.start().ok());
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(server.port());
  auto client = makeClient(Backend::kBeast, o);
  ASSERT_TRUE(client.ok());
  for (int i = 1; i <= 2; ++i) {
    Request r;
    r.target = "/metrics";
    StatusOr<Response> res = (*client)->sendSync(std::move(r));
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->body, "kshard_test_refreshes " + std::to_string(i) + "\n");
  }
  Request health;
  health.target = "/healthz";
  ASSERT_TRUE((*client)->sendSync(std::move(health)).ok());
  EXPECT_EQ(refreshes, 2) << "a probe refreshed the metrics";
  server.stop();
}

}  // namespace
}  // namespace kshard::http
