#include "kube/issuer_keys.h"

#include <algorithm>

namespace kshard::kube {

using nlohmann::json;

namespace {

ApiRequest getPath(std::string path, std::string accept, std::string description) {
  ApiRequest r;
  r.method = http::Method::kGet;
  r.path = std::move(path);
  r.accept = std::move(accept);
  r.description = std::move(description);
  return r;
}

}  // namespace

void FixedIssuerKeys::set(std::string issuer, JwkSet keys) {
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

ApiServerIssuerKeys::ApiServerIssuerKeys(Client& api, Scheduler& scheduler, Logger logger,
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
  api_.callAsync(getPath("/.well-known/openid-configuration", "application/json",
                         "get the service-account issuer"),
                 [this](StatusOr<json> discovery) {
                   if (!discovery.ok()) {
                     fetched(std::move(discovery), json());
                     return;
                   }
                   api_.callAsync(
                       getPath("/openid/v1/jwks", "application/jwk-set+json",
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
    auto keys = JwkSet::parse(jwksText);
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

}  // namespace kshard::kube
