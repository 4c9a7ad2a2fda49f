#include "operator/restartable_server.h"

#include <gtest/gtest.h>

#include "http/factory.h"

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

// A server on `port` (0: any) that answers GET /which with `name`.
std::unique_ptr<http::Server> serverNamed(const std::string& name, std::uint16_t port) {
  http::ServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  auto s = http::makeServer(http::Backend::kBeast, o);
  s->route(http::Method::kGet, "/which", [name](http::Request, http::Responder r) {
    r.send(http::Response{200, {}, name});
  });
  return s;
}

std::string which(std::uint16_t port) {
  http::ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(port);
  auto client = http::makeClient(http::Backend::kBeast, o);
  http::Request r;
  r.target = "/which";
  auto got = (*client)->sendSync(std::move(r));
  return got.ok() ? got->body : got.status().toString();
}

TEST(RestartableServer, ARestartServesWhatTheFactoryMakesNowOnTheSamePort) {
  // The first server picks the port; every later one is made on it.
  std::uint16_t port = 0;
  {
    auto probe = serverNamed("probe", 0);
    ASSERT_TRUE(probe->start().ok());
    port = probe->port();
    probe->stop();
  }
  std::string name = "first";
  RestartableServer server([&] { return serverNamed(name, port); },
                           Logger("test", LogLevel::kError, [](std::string_view) {}), 100ms);
  ASSERT_TRUE(server.start().ok());
  EXPECT_EQ(which(port), "first");
  name = "second";  // e.g. a renewed certificate on disk
  ASSERT_TRUE(server.restart().ok());
  EXPECT_EQ(which(port), "second");
  EXPECT_EQ(server.starts(), 2);
}

TEST(RestartableServer, AServerThatCannotStartIsMadeAgainAtTheNextRestart) {
  // Something else holds the port: the restart fails and leaves nothing running.
  auto squatter = serverNamed("squatter", 0);
  ASSERT_TRUE(squatter->start().ok());
  const std::uint16_t port = squatter->port();
  std::uint16_t target = 0;
  RestartableServer server([&] { return serverNamed("mine", target); },
                           Logger("test", LogLevel::kError, [](std::string_view) {}), 100ms);
  ASSERT_TRUE(server.start().ok());
  target = port;
  EXPECT_FALSE(server.restart().ok());
  squatter->stop();
  ASSERT_TRUE(server.restart().ok());
  EXPECT_EQ(which(port), "mine");
}

}  // namespace
}  // namespace kshard::manager
