#include "sidecar/token_authorizer.h"

#include <algorithm>

#include "protocol/audiences.h"
#include "protocol/wire.h"

namespace kshard::sidecar {

using nlohmann::json;

namespace {

kube::ApiRequest getPath(std::string path, std::string accept, std::string description) {
  kube::ApiRequest r;
  r.method = http::Method::kGet;
  r.path = std::move(path);
  r.accept = std::move(accept);
  r.description = std::move(description);
  return r;
}

// A token for `audience` and nothing else: one that another party would also take (several
// audiences) could be replayed there by whoever receives it here.
Status onlyFor(const kube::JwtClaims& claims, const std::string& audience) {
  if (claims.audiences.size() == 1 && claims.audiences[0] == audience) return {};
  std::string all;
  for (const auto& a : claims.audiences) all += (all.empty() ? "" : ", ") + a;
  return unauthenticated("the token's audiences are [" + all + "]; this call needs a token for \"" +
                         audience + "\" only");
}

}  // namespace

void FixedIssuerKeys::set(std::string issuer, kube::JwkSet keys) {
  auto next = std::make_shared<IssuerKeySet>();
  next->issuer = std::move(issuer);
  next->keys = std::move(keys);
  std::lock_guard lock(mu_);
  next->generation = current_ == nullptr ? 1 : current_->generation + 1;
  current_ = std::move(next);
}

std::shared_ptr<const IssuerKeySet> FixedIssuerKeys::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void FixedIssuerKeys::refreshSoon() {
  std::lock_guard lock(mu_);
  ++refreshRequests_;
}

int FixedIssuerKeys::refreshRequests() const {
  std::lock_guard lock(mu_);
  return refreshRequests_;
}

ApiServerIssuerKeys::ApiServerIssuerKeys(kube::Client& api, Scheduler& scheduler, Logger logger,
                                         Options options)
    : api_(api), scheduler_(scheduler), log_(std::move(logger)), options_(options) {}

ApiServerIssuerKeys::~ApiServerIssuerKeys() { stop(); }

void ApiServerIssuerKeys::start() { fetch(); }

void ApiServerIssuerKeys::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  if (timer_ != 0) scheduler_.cancel(timer_);
  timer_ = 0;
}

bool ApiServerIssuerKeys::waitLoaded(Duration timeout) const {
  std::unique_lock lock(mu_);
  return loaded_.wait_for(lock, timeout, [this] { return current_ != nullptr; });
}

std::shared_ptr<const IssuerKeySet> ApiServerIssuerKeys::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void ApiServerIssuerKeys::refreshSoon() {
  std::lock_guard lock(mu_);
  if (stopped_ || fetching_ || unknownKeyFetch_) return;
  if (unknownKeyGap_ == Duration{}) unknownKeyGap_ = options_.minRefreshGap;
  const SteadyTime next = lastFetch_ + unknownKeyGap_;
  const SteadyTime now = scheduler_.clock().now();
  unknownKeyFetch_ = true;
  scheduleLocked(next > now ? std::chrono::duration_cast<Duration>(next - now) : Duration{});
}

void ApiServerIssuerKeys::scheduleLocked(Duration delay) {
  if (timer_ != 0) scheduler_.cancel(timer_);
  timer_ = scheduler_.runAfter(delay, [this] { fetch(); });
}

void ApiServerIssuerKeys::fetch() {
  {
    std::lock_guard lock(mu_);
    if (stopped_ || fetching_) return;
    fetching_ = true;
    timer_ = 0;
    lastFetch_ = scheduler_.clock().now();
  }
  api_.callAsync(
      getPath("/.well-known/openid-configuration", "application/json",
              "get the service-account issuer"),
      [this](StatusOr<json> discovery) {
        if (!discovery.ok()) {
          fetched(std::move(discovery), json());
          return;
        }
        api_.callAsync(getPath("/openid/v1/jwks", "application/jwk-set+json",
                               "get the service-account issuer keys"),
                       [this, discovery = std::move(discovery)](StatusOr<json> jwks) mutable {
                         fetched(std::move(discovery), std::move(jwks));
                       });
      });
}

void ApiServerIssuerKeys::fetched(StatusOr<json> discovery, StatusOr<json> jwks) {
  Status failure;
  std::shared_ptr<IssuerKeySet> next;
  std::string jwksText;
  if (!discovery.ok()) {
    failure = discovery.status();
  } else if (!jwks.ok()) {
    failure = jwks.status();
  } else if (!discovery->is_object() || !(*discovery)["issuer"].is_string()) {
    failure = invalidArgument("the OIDC discovery document has no issuer");
  } else {
    jwksText = jwks->dump();
    auto keys = kube::JwkSet::parse(jwksText);
    if (!keys.ok()) {
      failure = keys.status();
    } else {
      next = std::make_shared<IssuerKeySet>();
      next->issuer = (*discovery)["issuer"].get<std::string>();
      next->keys = std::move(*keys);
    }
  }
  std::lock_guard lock(mu_);
  fetching_ = false;
  if (stopped_) return;
  if (!failure.ok()) {
    failureDelay_ = std::clamp(failureDelay_ * 2, options_.retryAfterFailure,
                               std::max(options_.retryAfterFailure, options_.maxRetryDelay));
    log_.warn("cannot load the service-account issuer keys; retrying",
              {{"error", failure.toString()},
               {"retry_in_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(failureDelay_).count()}});
    scheduleLocked(failureDelay_);
    return;
  }
  failureDelay_ = {};
  const bool changed =
      current_ == nullptr || jwksText != lastJwks_ || next->issuer != current_->issuer;
  if (changed) {
    unknownKeyGap_ = options_.minRefreshGap;
  } else if (unknownKeyFetch_) {
    // Asked for an unknown key and found none new: the next such refresh waits twice as long.
    unknownKeyGap_ = std::min(std::max(unknownKeyGap_, options_.minRefreshGap) * 2,
                              std::max(options_.minRefreshGap, options_.refreshEvery));
  }
  unknownKeyFetch_ = false;
  if (changed) {
    next->generation = current_ == nullptr ? 1 : current_->generation + 1;
    std::string ids;
    for (const auto& id : next->keys.keyIds()) ids += (ids.empty() ? "" : ",") + id;
    log_.info("service-account issuer keys loaded", {{"issuer", next->issuer},
                                                     {"keys", ids},
                                                     {"skipped", next->keys.skipped()},
                                                     {"generation", next->generation}});
    current_ = std::move(next);
    lastJwks_ = std::move(jwksText);
    loaded_.notify_all();
  }
  scheduleLocked(options_.refreshEvery);
}

TokenAuthorizer::TokenAuthorizer(IssuerKeys& keys, const RoutingTable& table, const Clock& clock,
                                 TokenAuthorizerOptions options)
    : keys_(keys),
      table_(table),
      clock_(clock),
      options_(std::move(options)),
      operatorAudience_(protocol::sidecarAudience(options_.shardMap)),
      peerAudience_(protocol::peerAudience(options_.shardMap)) {}

StatusOr<kube::JwtClaims> TokenAuthorizer::verify(const http::Request& request,
                                                  const std::string& audience) {
  const auto header = request.headers.get(protocol::kAuthorizationHeader);
  const std::string_view token = kube::bearerToken(header.value_or(""));
  if (token.empty()) {
    return unauthenticated(
        "no bearer token: the caller must send a service-account token for "
        "audience \"" +
        audience + "\"");
  }
  const auto set = keys_.current();
  if (set == nullptr) {
    return unavailable("the service-account issuer keys are not loaded yet");
  }
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               clock_.wallNow().time_since_epoch())
                               .count();
  {
    std::lock_guard lock(mu_);
    if (cacheGeneration_ != set->generation) {
      cache_.clear();
      cacheGeneration_ = set->generation;
    }
    auto it = cache_.find(token);
    if (it != cache_.end()) {
      if (it->second.expiresAt >= now) {
        if (Status s = onlyFor(it->second, audience); !s.ok()) return s;
        return it->second;
      }
      cache_.erase(it);
    }
  }
  // The cache is checked without leeway, so an entry never outlives the token; a token within
  // the leeway is verified afresh.
  auto claims = kube::verifyJwt(token, set->keys, {set->issuer, audience, now, /*leeway=*/60});
  if (!claims.ok()) {
    if (claims.status().code() == StatusCode::kNotFound) {
      keys_.refreshSoon();
      return unauthenticated("token signed by an unknown key (" + claims.status().message() +
                             "); the keys are being refreshed");
    }
    return claims.status();
  }
  if (Status s = onlyFor(*claims, audience); !s.ok()) return s;
  if (claims->expiresAt >= now) {
    std::lock_guard lock(mu_);
    if (cacheGeneration_ == set->generation) {
      if (cache_.size() >= options_.maxCachedTokens) cache_.clear();
      cache_.emplace(std::string(token), *claims);
    }
  }
  return claims;
}

Status TokenAuthorizer::authorizeOperator(const http::Request& request) {
  auto claims = verify(request, operatorAudience_);
  if (!claims.ok()) return claims.status();
  if (claims->subject != options_.operatorSubject) {
    return permissionDenied("only " + options_.operatorSubject +
                            " may call this; the token is " + claims->subject);
  }
  return {};
}

Status TokenAuthorizer::authorizePeer(const http::Request& request) {
  auto claims = verify(request, peerAudience_);
  if (!claims.ok()) return claims.status();
  if (claims->podName.empty()) {
    return permissionDenied("the token of " + claims->subject + " is not bound to a pod");
  }
  if (claims->namespace_ != options_.ns) {
    return permissionDenied("pod " + claims->namespace_ + "/" + claims->podName +
                            " is not in namespace " + options_.ns);
  }
  const auto snapshot = table_.snapshot();
  if (const RouteOwner* p = snapshot->podNamed(claims->podName)) {
    if (p->uid == claims->podUid) return {};
    return permissionDenied("pod " + claims->podName + " has uid " + p->uid + " in ShardMap " +
                            options_.shardMap + ", the token says " + claims->podUid);
  }
  // A pod that has just drained and unregistered still forwards the requests its app had in
  // flight, each for at most sendTimeout: it stays accepted for twice that after it left.
  const SteadyTime now = clock_.now();
  for (const DepartedPod& d : snapshot->departed) {
    if (d.pod == claims->podName && d.uid == claims->podUid &&
        now - d.at <= 2 * snapshot->spec.sendTimeout) {
      return {};
    }
  }
  // Not registered in this copy of the status: a pod that registered a moment ago, before this
  // sidecar saw the new status, or a pod of another ShardMap. The sender retries either way.
  return unavailable("pod " + claims->podName + " is not a registered pod of ShardMap " +
                     options_.shardMap + " in this sidecar's view (epoch " +
                     std::to_string(snapshot->epoch) + ")");
}

std::size_t TokenAuthorizer::cachedTokens() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

}  // namespace kshard::sidecar
