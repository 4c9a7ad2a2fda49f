// ScriptedClient: an http::Client for sidecar tests that answers each request with the next
// scripted response (Unavailable when none is left) and records what it was sent; and a
// ManagerClient that talks to one.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "http/client.h"
#include "sidecar/manager_client.h"

namespace kshard::sidecar::testing {

// Answers each request with the next scripted response; records what it was sent.
struct ScriptedManager {
  std::deque<http::Response> answers;
  std::vector<http::Request> seen;
};

class ScriptedClient final : public http::Client {
 public:
  explicit ScriptedClient(std::shared_ptr<ScriptedManager> m) : m_(std::move(m)) {}
  void send(http::Request r, http::ResponseCallback done) override {
    m_->seen.push_back(r);
    if (m_->answers.empty()) return done(unavailable("no scripted answer"));
    http::Response a = m_->answers.front();
    m_->answers.pop_front();
    done(std::move(a));
  }
  StatusOr<std::unique_ptr<http::ResponseStream>> openStream(http::Request) override {
    return unavailable("no streams");
  }

 private:
  std::shared_ptr<ScriptedManager> m_;
};

inline http::Response answer(int status, std::string body) {
  return http::Response{status, {}, std::move(body)};
}

// A ManagerClient of pod counter-0 (ShardMap demo/counter) whose every call goes to `manager`.
inline std::unique_ptr<ManagerClient> scriptedManagerClient(
    std::shared_ptr<ScriptedManager> manager, RoutingTable& table, Scheduler& scheduler,
    Random& random, Logger logger, std::function<std::string()> authorization) {
  Identity self;
  self.pod = "counter-0";
  self.uid = "u-0";
  self.podIp = "10.0.0.5";
  self.version = "1.0.0";
  self.shardMap = {"demo", "counter"};
  self.peerAddress = "10.0.0.5:7101";
  ManagerClient::Options o;
  o.managerOverride = "10.0.0.1:7200";
  return std::make_unique<ManagerClient>(
      self, table,
      [m = std::move(manager)](const std::string&) { return std::make_unique<ScriptedClient>(m); },
      scheduler, random, std::move(logger), o, std::move(authorization));
}

}  // namespace kshard::sidecar::testing
