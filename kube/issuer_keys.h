// The service-account issuer's public keys, for verifying projected service-account tokens
// locally (kube/jwt.h) instead of asking the API server with a TokenReview per call. The sidecar
// checks its peers' and the operator's tokens with them; the operator checks the manager API's
// callers' tokens with them before any TokenReview.
//
//   kube::ApiServerIssuerKeys keys(api, scheduler, logger);
//   keys.start();
//   if (auto set = keys.current()) verifyJwt(token, set->keys, {set->issuer, "kshard.io/operator", now});
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"
#include "base/logger.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/jwt.h"

namespace kshard::kube {

// The issuer's keys at one moment.
struct IssuerKeySet {
  std::string issuer;  // from the OIDC discovery document; tokens must carry it as iss
  JwkSet keys;
  std::uint64_t generation = 0;  // changes whenever the keys change
};

class IssuerKeys {
 public:
  virtual ~IssuerKeys() = default;
  // The current set; null until the first successful fetch.
  virtual std::shared_ptr<const IssuerKeySet> current() const = 0;
  // A token named a key the set lacks: fetch again soon (implementations rate-limit).
  virtual void refreshSoon() = 0;
};

// A key set given by the caller (tests, and clusters that distribute the keys otherwise).
class FixedIssuerKeys final : public IssuerKeys {
 public:
  // Replaces the set (a new generation).
  void set(std::string issuer, JwkSet keys);
  std::shared_ptr<const IssuerKeySet> current() const override;
  void refreshSoon() override;
  int refreshRequests() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const IssuerKeySet> current_;
  int refreshRequests_ = 0;
};

// Keys from the API server: GET /.well-known/openid-configuration (the issuer) and
// /openid/v1/jwks, which every ServiceAccount may read (the bootstrap ClusterRole
// system:service-account-issuer-discovery). Fetched at start, every `refreshEvery`, and on
// refreshSoon() at most once per gap; a failed fetch keeps the last good set and is retried with
// backoff. The gap starts at `minRefreshGap` and doubles, up to `refreshEvery`, each time such a
// fetch finds the keys unchanged (the unknown key was not a rotation but garbage or a forgery),
// and starts over when the keys change: a flood of tokens naming unknown keys, sent to every
// sidecar, costs the API server no more than the periodic refresh after a few minutes (for 1,000
// sidecars two requests each per 5 minutes, about 7 a second), while a rotation is picked up
// within `minRefreshGap` (within `refreshEvery` right after such a flood).
class ApiServerIssuerKeys final : public IssuerKeys {
 public:
  struct Options {
    Duration refreshEvery = std::chrono::minutes(5);
    Duration minRefreshGap = std::chrono::seconds(10);
    Duration retryAfterFailure = std::chrono::seconds(2);  // doubling up to maxRetryDelay
    Duration maxRetryDelay = std::chrono::seconds(30);
  };
  ApiServerIssuerKeys(Client& api, Scheduler& scheduler, Logger logger, Options options);
  ApiServerIssuerKeys(Client& api, Scheduler& scheduler, Logger logger)
      : ApiServerIssuerKeys(api, scheduler, std::move(logger), Options{}) {}
  ~ApiServerIssuerKeys() override;

  void start();
  void stop();
  // Blocks until a set is loaded or `timeout` passes; true when one is.
  bool waitLoaded(Duration timeout) const;

  std::shared_ptr<const IssuerKeySet> current() const override;
  void refreshSoon() override;

 private:
  void fetch();
  void fetched(StatusOr<nlohmann::json> discovery, StatusOr<nlohmann::json> jwks);
  void scheduleLocked(Duration delay);

  Client& api_;
  Scheduler& scheduler_;
  Logger log_;
  const Options options_;
  mutable std::mutex mu_;
  mutable std::condition_variable loaded_;
  std::shared_ptr<const IssuerKeySet> current_;
  std::string lastJwks_;
  bool stopped_ = false;
  bool fetching_ = false;
  Scheduler::TaskId timer_ = 0;
  SteadyTime lastFetch_{};
  Duration failureDelay_{};
  Duration unknownKeyGap_{};      // the current gap between refreshSoon() fetches
  bool unknownKeyFetch_ = false;  // the fetch in flight was asked for by refreshSoon()
};

}  // namespace kshard::kube
