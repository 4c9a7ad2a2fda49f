// TokenAuthorizer: the peer API's callers proven by their service-account tokens, verified
// locally against the cluster's service-account issuer keys. Each kind of caller needs a token
// whose only audience names this sidecar's ShardMap and the direction (protocol/audiences.h):
//
//   - ping, assign, unassign: only the operator's ServiceAccount (`operatorSubject`,
//     "system:serviceaccount:kshard-system:kshard"), with audience
//     "kshard.io/sidecar/<ns>/<map>", which the operator mints for this map alone. The operator's
//     token that a pod of another map receives does not open this one.
//   - forwarded messages: only pods of this sidecar's ShardMap, i.e. a token with audience
//     "kshard.io/peer/<ns>/<map>" bound to a pod of this namespace that is registered in the
//     cached ShardMap status (name and uid). A token of another audience (the one a pod sends the
//     operator) is refused, so what a peer receives from another cannot be replayed elsewhere.
//
// Answers: Unauthenticated (no token, bad signature, expired, wrong audience or issuer),
// PermissionDenied (a valid token of someone else), Unavailable (cannot tell yet: the keys are not
// loaded, or the calling pod is not yet in this sidecar's copy of the status; the caller retries).
//
// Verified tokens are cached until they expire, so a forwarded message costs one hash lookup; the
// cache is dropped whenever the key set changes, so a key removed by rotation stops working at
// once. A token naming a key the set does not have makes the key source refresh (rate-limited).
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/clock.h"
#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "kube/jwt.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

// The issuer's keys at one moment.
struct IssuerKeySet {
  std::string issuer;  // from the OIDC discovery document; tokens must carry it as iss
  kube::JwkSet keys;
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
  void set(std::string issuer, kube::JwkSet keys);
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
  ApiServerIssuerKeys(kube::Client& api, Scheduler& scheduler, Logger logger, Options options);
  ApiServerIssuerKeys(kube::Client& api, Scheduler& scheduler, Logger logger)
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

  kube::Client& api_;
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

struct TokenAuthorizerOptions {
  std::string operatorSubject;  // "system:serviceaccount:<namespace>:<name>"
  std::string ns;               // this pod's namespace
  std::string shardMap;         // "<namespace>/<name>": names the audiences the callers need
  std::size_t maxCachedTokens = 4096;
};

class TokenAuthorizer final : public RequestAuthorizer {
 public:
  TokenAuthorizer(IssuerKeys& keys, const RoutingTable& table, const Clock& clock,
                  TokenAuthorizerOptions options);

  Status authorizeOperator(const http::Request& request) override;
  Status authorizePeer(const http::Request& request) override;

  // Verified tokens in the cache, for tests.
  std::size_t cachedTokens() const;

 private:
  // The claims of the request's token, which must have `audience` as its only audience.
  StatusOr<kube::JwtClaims> verify(const http::Request& request, const std::string& audience);

  IssuerKeys& keys_;
  const RoutingTable& table_;
  const Clock& clock_;
  const TokenAuthorizerOptions options_;
  const std::string operatorAudience_;
  const std::string peerAudience_;
  mutable std::mutex mu_;
  std::uint64_t cacheGeneration_ = 0;
  // Looked up by the request's string_view: no copy of the token per forwarded message.
  struct TokenHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, kube::JwtClaims, TokenHash, std::equal_to<>> cache_;
};

}  // namespace kshard::sidecar
