// kube::Client: a Kubernetes REST client for any resource, as JSON. It follows client-go's
// request semantics: a client-side token-bucket rate limit (whose queue is bounded:
// maxRateLimitWait), a per-attempt timeout, retries with
// backoff for 429 (honouring Retry-After) and, on idempotent verbs only, for 5xx and transport
// errors, one retry after a 401 when the token source has a fresher token (a rotated
// ServiceAccount token), and API errors parsed into typed Status codes (see api_error.h).
//
// Retry policy, as client-go's rest.Request (the decision is per attempt, at most
// `maxRetries` further attempts):
//   - 429 TooManyRequests: every verb. The API server (max-in-flight / priority and fairness)
//     rejected the request before acting on it. Waits Retry-After, else the backoff.
//   - 5xx with a Retry-After header: every verb; the server says it did not process it.
//   - other 5xx and transport errors (refused, reset, timed out): GET only. A write may have been
//     applied before the failure; repeating it would turn success into a misleading Conflict
//     (update with resourceVersion), AlreadyExists (create) or NotFound (delete with
//     preconditions). Callers of writes see the error and re-read, which is what a level-based
//     reconcile does anyway.
//
//   kube::Client api(transport, scheduler, random, logger, {.userAgent = "kshard-operator/0.1.0"},
//                    config.token, config.pathPrefix);
//   auto pod = api.get(kube::resources::kPods, "demo", "counter-0");
//   if (!pod.ok() && pod.status().code() == StatusCode::kNotFound) { ... }
//   auto sm = api.patch(kShardMaps, "demo", "counter", kube::PatchType::kMerge,
//                       {{"status", {{"epoch", 58}}}}, {.subresource = "status"});
//
// Thread-safe. Asynchronous calls complete on a transport or scheduler thread, or inline (an
// invalid request, a client being destroyed, a transport that answers inline). The blocking
// calls wait for the asynchronous ones: never make them on the Scheduler's thread or in a
// transport callback. The transport, scheduler, random and token source must outlive the
// Client; its destructor fails calls still waiting (rate limit, retry backoff) with Cancelled and
// waits for those in flight, so no callback runs after it returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "http/client.h"
#include "kube/api_request.h"
#include "kube/backoff.h"
#include "kube/rate_limiter.h"
#include "kube/resource.h"
#include "kube/token_source.h"
#include "kube/watch.h"

namespace kshard::kube {

// "kshard/<version>".
std::string defaultUserAgent();

struct ClientOptions {
  std::string userAgent = defaultUserAgent();  // "kshard-operator/0.1.0" for the operator
  double qps = 50;                             // client-go: 5
  int burst = 100;                             // client-go: 10
  // A request that would wait longer than this for the rate limit fails at once with
  // ResourceExhausted (kube/rate_limiter.h); client-go waits without bound.
  Duration maxRateLimitWait = std::chrono::seconds(30);
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(30)};  // per attempt
  int maxRetries = 5;
  BackoffPolicy retryBackoff{std::chrono::milliseconds(250), std::chrono::seconds(8), 2.0, 0.5};
  std::chrono::seconds maxRetryAfter{60};  // a longer Retry-After is capped
  std::int64_t listPageSize = 500;         // listAll's page size
};

using JsonCallback = std::function<void(StatusOr<nlohmann::json>)>;

struct ListResult {
  std::vector<nlohmann::json> items;
  std::string resourceVersion;  // of the list: start a watch here
};
using ListCallback = std::function<void(StatusOr<ListResult>)>;

class Client {
 public:
  // `pathPrefix` is Config::pathPrefix; `token` may be null (no bearer token).
  Client(http::Client& transport, Scheduler& scheduler, Random& random, Logger logger,
         ClientOptions options = {}, std::shared_ptr<TokenSource> token = nullptr,
         std::string pathPrefix = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` with rate limiting and retries; `done` runs exactly once with the decoded
  // response body (an empty body gives an empty object) or the error.
  void callAsync(ApiRequest request, JsonCallback done);
  // Blocking form of callAsync.
  StatusOr<nlohmann::json> call(ApiRequest request);

  // Every item, page by page (`listPageSize`, `limit`/`continue`). When a continue token expires
  // mid-way (410), falls back to one unpaged list, as client-go's pager does.
  void listAllAsync(const ResourceRef& resource, std::string ns, ListOptions options,
                    ListCallback done);
  StatusOr<ListResult> listAll(const ResourceRef& resource, std::string_view ns,
                               ListOptions options = {});

  // Opens a watch (blocking until the response headers arrive). Rate limited; one attempt (the
  // informer owns the retry policy of watches). A non-2xx answer becomes its typed Status, e.g.
  // kGone when the resourceVersion is too old.
  StatusOr<std::unique_ptr<WatchStream>> watch(const ResourceRef& resource, std::string_view ns,
                                               const WatchOptions& options);

  // Blocking conveniences over call().
  StatusOr<nlohmann::json> get(const ResourceRef& resource, std::string_view ns,
                               std::string_view name);
  // One response (one page when options.limit > 0): the List object with items and metadata.
  StatusOr<nlohmann::json> list(const ResourceRef& resource, std::string_view ns,
                                const ListOptions& options = {});
  StatusOr<nlohmann::json> create(const ResourceRef& resource, std::string_view ns,
                                  nlohmann::json object, const WriteOptions& options = {});
  StatusOr<nlohmann::json> createSubresource(const ResourceRef& resource, std::string_view ns,
                                             std::string_view name, std::string_view subresource,
                                             nlohmann::json body, const WriteOptions& options = {});
  StatusOr<nlohmann::json> update(const ResourceRef& resource, std::string_view ns,
                                  nlohmann::json object, const WriteOptions& options = {});
  // PUT .../status: only the status is written; metadata.resourceVersion guards it.
  StatusOr<nlohmann::json> updateStatus(const ResourceRef& resource, std::string_view ns,
                                        nlohmann::json object);
  StatusOr<nlohmann::json> patch(const ResourceRef& resource, std::string_view ns,
                                 std::string_view name, PatchType type, nlohmann::json patch,
                                 const WriteOptions& options = {});
  // The deleted object (or a Status when the API returns one).
  StatusOr<nlohmann::json> remove(const ResourceRef& resource, std::string_view ns,
                                  std::string_view name, const DeleteOptions& options = {});

  const ClientOptions& options() const { return options_; }

 private:
  struct Call;
  struct ListState;
  void startAttempt(std::shared_ptr<Call> call);
  void send(std::shared_ptr<Call> call);
  void onResponse(std::shared_ptr<Call> call, StatusOr<http::Response> response);
  void retryLater(std::shared_ptr<Call> call, Duration delay);
  void finish(const std::shared_ptr<Call>& call, StatusOr<nlohmann::json> result);
  // Runs `fn` after `delay` on the scheduler, unless the client is being destroyed (then fails
  // the call with Cancelled).
  void schedule(std::shared_ptr<Call> call, Duration delay);
  StatusOr<http::Request> toHttp(const ApiRequest& request, std::string& tokenSent);
  void listPage(std::shared_ptr<ListState> state);

  http::Client& transport_;
  Scheduler& scheduler_;
  Random& random_;  // under mu_
  Logger logger_;
  const ClientOptions options_;
  const std::shared_ptr<TokenSource> token_;
  const std::string pathPrefix_;
  TokenBucket limiter_;

  std::mutex mu_;
  std::condition_variable idle_;
  bool stopping_ = false;
  std::size_t outstanding_ = 0;  // calls started and not finished
  std::set<std::shared_ptr<Call>> scheduled_;
};

}  // namespace kshard::kube
