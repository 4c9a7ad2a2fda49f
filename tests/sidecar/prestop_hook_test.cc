#include "sidecar/prestop_hook.h"

#include <gtest/gtest.h>

#include <future>

#include "http/factory.h"

namespace kshard::sidecar {
namespace {

using namespace std::chrono_literals;

TEST(PreStopHook, ReadsTheTwoKindsTheInjectorMoves) {
  auto get = PreStopHook::parse(
      R"({"httpGet":{"path":"quiesce","port":9000,"scheme":"HTTPS",)"
      R"("httpHeaders":[{"name":"X-Why","value":"drain"}]}})");
  ASSERT_TRUE(get.ok()) << get.status().toString();
  ASSERT_TRUE(get->get().has_value());
  EXPECT_EQ(get->get()->path, "/quiesce");
  EXPECT_EQ(get->get()->port, 9000);
  EXPECT_TRUE(get->get()->https);
  ASSERT_EQ(get->get()->headers.size(), 1u);
  auto sleep = PreStopHook::parse(R"({"sleep":{"seconds":5}})");
  ASSERT_TRUE(sleep.ok());
  EXPECT_FALSE(sleep->get().has_value());
  EXPECT_EQ(sleep->sleep(), 5s);
}

TEST(PreStopHook, RefusesWhatItCannotRun) {
  for (const char* bad :
       {"", "[]", R"({"exec":{"command":["sh"]}})", R"({"httpGet":{"port":"http"}})",
        R"({"httpGet":{"port":0}})", R"({"httpGet":{"port":80,"scheme":"FTP"}})",
        R"({"httpGet":{"port":80,"httpHeaders":[{"name":"x"}]}})", R"({"sleep":{"seconds":-1}})",
        R"({"sleep":{"seconds":1e9}})"}) {
    EXPECT_FALSE(PreStopHook::parse(bad).ok()) << bad;
  }
}

TEST(PreStopHook, ASleepHookEndsAfterItsTime) {
  auto hook = PreStopHook::parse(R"({"sleep":{"seconds":3}})");
  ASSERT_TRUE(hook.ok());
  ManualScheduler scheduler;
  std::optional<Status> done;
  hook->run("127.0.0.1", scheduler, 30s, [&](Status s) { done = s; });
  scheduler.advance(2900ms);
  EXPECT_FALSE(done.has_value());
  scheduler.advance(100ms);
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->ok());
}

TEST(PreStopHook, AnHttpGetHookCallsTheAppWithItsHeaders) {
  auto server = http::makeServer(http::Backend::kBeast, {});
  std::promise<std::string> seen;
  server->route(http::Method::kGet, "/quiesce", [&](http::Request r, http::Responder res) {
    seen.set_value(std::string(r.headers.get("X-Why").value_or("")));
    res.send(http::Response::json(200, "{}"));
  });
  ASSERT_TRUE(server->start().ok());
  auto hook = PreStopHook::parse(R"({"httpGet":{"path":"/quiesce","port":)" +
                                 std::to_string(server->port()) +
                                 R"(,"httpHeaders":[{"name":"X-Why","value":"drain"}]}})");
  ASSERT_TRUE(hook.ok());
  ManualScheduler scheduler;
  std::promise<Status> done;
  hook->run("127.0.0.1", scheduler, 5s, [&](Status s) { done.set_value(s); });
  auto result = done.get_future();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(result.get().ok());
  EXPECT_EQ(seen.get_future().get(), "drain");
  server->stop();
}

}  // namespace
}  // namespace kshard::sidecar
