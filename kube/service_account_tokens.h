// ServiceAccountTokens: tokens of one ServiceAccount for the audiences its holder names, minted
// with TokenRequest (POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token), kept, and minted
// again before they expire. For a component that proves itself to several parties with a token
// for each one's audience only, so that a token one party receives is worth nothing to another.
// The ServiceAccount needs `create` on serviceaccounts/token (RBAC can limit it to its own name).
//
//   kube::ServiceAccountTokens tokens(api, clock, {.ns = "kshard-system", .name = "kshard"});
//   tokens.get("kshard.io/sidecar/demo/counter", [](StatusOr<std::string> token) { ... });
//
// A token is asked for `lifetime` (TokenRequest takes at least 10 minutes) and kept until half of
// the lifetime the API server granted has passed; the next get() mints a new one. Callers asking
// for an audience while its token is being minted wait for that one request. When minting fails,
// the kept token is given while it has not expired (the parties check tokens locally, so it still
// works while the API server is away); without one, the error. At most `maxAudiences` audiences
// are kept: beyond, expired ones are dropped, then all. Thread-safe; `done` runs on the API
// client's thread or inline, once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "kube/client.h"

namespace kshard::kube {

struct ServiceAccountTokensOptions {
  std::string ns;    // the ServiceAccount's namespace
  std::string name;  // and name
  Duration lifetime = std::chrono::minutes(20);
  std::size_t maxAudiences = 65536;
};

// The TokenRequest body for `audience` and `lifetime` (whole seconds).
nlohmann::json tokenRequestObject(const std::string& audience, Duration lifetime);

class ServiceAccountTokens {
 public:
  using Callback = std::function<void(StatusOr<std::string>)>;
  static constexpr Duration kMinLifetime = std::chrono::minutes(10);  // TokenRequest's minimum

  // `api` and `clock` must outlive every call in flight.
  ServiceAccountTokens(Client& api, const Clock& clock, ServiceAccountTokensOptions options);

  // A token of the ServiceAccount whose only audience is `audience`.
  void get(const std::string& audience, Callback done);

  // TokenRequests sent so far (for tests and logs).
  std::size_t minted() const;

 private:
  struct State;
  Client& api_;
  std::shared_ptr<State> state_;  // shared with the callbacks of requests in flight
};

}  // namespace kshard::kube
