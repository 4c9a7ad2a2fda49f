#include "kube/client.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "kube/api_error.h"

#ifndef KSHARD_VERSION
#define KSHARD_VERSION "dev"
#endif

namespace kshard::kube {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxErrorBodyBytes = 1u << 20;

// Blocks the calling thread until the asynchronous operation started by `start` completes.
template <typename T, typename Start>
StatusOr<T> blockOn(Start start) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<StatusOr<T>> result;
  };
  auto w = std::make_shared<Waiter>();
  start([w](StatusOr<T> r) {
    std::lock_guard lock(w->mu);
    w->result.emplace(std::move(r));
    w->cv.notify_all();
  });
  std::unique_lock lock(w->mu);
  w->cv.wait(lock, [&] { return w->result.has_value(); });
  return std::move(*w->result);
}

// Retry-After in delta-seconds (the API server's form); HTTP dates are not used by Kubernetes.
std::optional<std::chrono::seconds> retryAfterHeader(const http::Headers& headers) {
  auto v = headers.get("Retry-After");
  if (!v || v->empty() || v->size() > 9) return std::nullopt;
  long long secs = 0;
  for (char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    secs = secs * 10 + (c - '0');
  }
  return std::chrono::seconds(secs);
}

StatusOr<json> decodeBody(const std::string& body, const std::string& description) {
  if (body.empty()) return json::object();
  auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return internalError(description + ": the response is not JSON: " + body.substr(0, 120));
  }
  return j;
}

}  // namespace

std::string defaultUserAgent() { return std::string("kshard/") + KSHARD_VERSION; }

struct Client::Call {
  ApiRequest request;
  JsonCallback done;
  int retries = 0;
  bool reauthenticated = false;
  bool throughLimiter = false;  // the scheduled step: true = rate limit then send; false = send
  Duration backoff{0};
  Scheduler::TaskId task = 0;
  std::string tokenSent;
};

Client::Client(http::Client& transport, Scheduler& scheduler, Random& random, Logger logger,
               ClientOptions options, std::shared_ptr<TokenSource> token, std::string pathPrefix)
    : transport_(transport),
      scheduler_(scheduler),
      random_(random),
      logger_(std::move(logger)),
      options_(std::move(options)),
      token_(std::move(token)),
      pathPrefix_(std::move(pathPrefix)),
      limiter_(scheduler.clock(), options_.qps, options_.burst, options_.maxRateLimitWait) {}

Client::~Client() {
  std::vector<std::shared_ptr<Call>> waiting;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    waiting.assign(scheduled_.begin(), scheduled_.end());
  }
  for (auto& call : waiting) {
    // A task that cannot be cancelled is running now; it sees stopping_ and fails itself.
    if (!scheduler_.cancel(call->task)) continue;
    {
      std::lock_guard lock(mu_);
      scheduled_.erase(call);
    }
    finish(call, cancelled(call->request.description + ": the client is shutting down"));
  }
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return outstanding_ == 0; });
}

void Client::callAsync(ApiRequest request, JsonCallback done) {
  if (!request.invalid.ok()) {
    done(request.invalid.withContext(request.description));
    return;
  }
  auto call = std::make_shared<Call>();
  call->request = std::move(request);
  call->done = std::move(done);
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      call->done(cancelled(call->request.description + ": the client is shutting down"));
      return;
    }
    ++outstanding_;
  }
  startAttempt(std::move(call));
}

StatusOr<json> Client::call(ApiRequest request) {
  return blockOn<json>([&](JsonCallback cb) { callAsync(std::move(request), std::move(cb)); });
}

void Client::startAttempt(std::shared_ptr<Call> call) {
  const StatusOr<Duration> wait = limiter_.reserve();
  if (!wait.ok()) {
    finish(call, wait.status().withContext(call->request.description));
    return;
  }
  if (*wait > Duration{0}) {
    call->throughLimiter = false;
    schedule(std::move(call), *wait);
    return;
  }
  send(std::move(call));
}

void Client::schedule(std::shared_ptr<Call> call, Duration delay) {
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    finish(call, cancelled(call->request.description + ": the client is shutting down"));
    return;
  }
  scheduled_.insert(call);
  // Holding mu_ across runAfter keeps the task from running before its id is recorded;
  // schedulers never run a task inline.
  call->task = scheduler_.runAfter(delay, [this, call] {
    bool stop;
    {
      std::lock_guard inner(mu_);
      if (scheduled_.erase(call) == 0) return;  // cancelled by the destructor
      stop = stopping_;
    }
    if (stop) {
      finish(call, cancelled(call->request.description + ": the client is shutting down"));
    } else if (call->throughLimiter) {
      startAttempt(call);
    } else {
      send(call);
    }
  });
}

void Client::retryLater(std::shared_ptr<Call> call, Duration delay) {
  ++call->retries;
  call->throughLimiter = true;
  logger_.debug(
      "retrying kubernetes request",
      {{"request", call->request.description},
       {"retry", call->retries},
       {"delay_ms", static_cast<long long>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(delay).count())}});
  schedule(std::move(call), delay);
}

StatusOr<http::Request> Client::toHttp(const ApiRequest& r, std::string& tokenSent) {
  http::Request h;
  h.method = r.method;
  h.target = pathPrefix_ + r.target();
  h.timeout = r.timeout.count() > 0 ? r.timeout : options_.requestTimeout;
  h.headers.set("Accept", r.accept);
  h.headers.set("User-Agent", options_.userAgent);
  if (r.body) {
    h.headers.set("Content-Type", r.contentType);
    // Strings from the cluster may hold invalid UTF-8; replace rather than throw.
    h.body = r.body->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  tokenSent.clear();
  if (token_) {
    auto t = token_->token();
    if (!t.ok()) return t.status().withContext(r.description);
    tokenSent = *t;
    if (!tokenSent.empty()) h.headers.set("Authorization", "Bearer " + tokenSent);
  }
  return h;
}

void Client::send(std::shared_ptr<Call> call) {
  bool stop;
  {
    std::lock_guard lock(mu_);
    stop = stopping_;
  }
  if (stop) {
    finish(call, cancelled(call->request.description + ": the client is shutting down"));
    return;
  }
  auto request = toHttp(call->request, call->tokenSent);
  if (!request.ok()) {
    finish(call, request.status());
    return;
  }
  transport_.send(std::move(*request), [this, call](StatusOr<http::Response> response) {
    onResponse(call, std::move(response));
  });
}

void Client::onResponse(std::shared_ptr<Call> call, StatusOr<http::Response> response) {
  const ApiRequest& req = call->request;
  const bool retriesLeft = call->retries < options_.maxRetries;
  const auto nextBackoff = [&] {
    std::lock_guard lock(mu_);
    call->backoff =
        call->backoff == Duration{0}
            ? options_.retryBackoff.initial
            : std::min<Duration>(
                  Duration{static_cast<Duration::rep>(static_cast<double>(call->backoff.count()) *
                                                      options_.retryBackoff.factor)},
                  options_.retryBackoff.max);
    return jittered(call->backoff, options_.retryBackoff.jitter, random_);
  };
  if (!response.ok()) {
    if (req.idempotent() && retriesLeft) {
      retryLater(std::move(call), nextBackoff());
      return;
    }
    finish(call, response.status().withContext(req.description));
    return;
  }
  const http::Response& resp = *response;
  if (resp.status >= 200 && resp.status < 300) {
    finish(call, decodeBody(resp.body, req.description));
    return;
  }
  ApiError error = parseApiError(resp.status, resp.body);
  const auto retryAfter = retryAfterHeader(resp.headers);
  if (retryAfter) error.retryAfter = retryAfter;

  // A rotated token: the source re-read its file and has a new one; a 401 means the request was
  // not processed, so any verb may be repeated once.
  if (resp.status == 401 && token_ && !call->reauthenticated &&
      token_->onUnauthorized(call->tokenSent)) {
    call->reauthenticated = true;
    startAttempt(std::move(call));
    return;
  }
  const bool retryable =
      resp.status == 429 || (resp.status >= 500 && (retryAfter.has_value() || req.idempotent()));
  if (retryable && retriesLeft) {
    Duration delay = error.retryAfter
                         ? Duration(std::min(*error.retryAfter, options_.maxRetryAfter))
                         : nextBackoff();
    retryLater(std::move(call), delay);
    return;
  }
  finish(call, error.toStatus(req.description));
}

void Client::finish(const std::shared_ptr<Call>& call, StatusOr<json> result) {
  JsonCallback done = std::move(call->done);
  done(std::move(result));
  std::lock_guard lock(mu_);
  --outstanding_;
  if (outstanding_ == 0) idle_.notify_all();
}

struct Client::ListState {
  ResourceRef resource;
  std::string ns;
  ListOptions options;
  ListCallback done;
  ListResult result;
  bool unpaged = false;
};

void Client::listAllAsync(const ResourceRef& resource, std::string ns, ListOptions options,
                          ListCallback done) {
  auto state = std::make_shared<ListState>();
  state->resource = resource;
  state->ns = std::move(ns);
  state->options = std::move(options);
  if (state->options.limit <= 0) state->options.limit = options_.listPageSize;
  state->done = std::move(done);
  listPage(std::move(state));
}

void Client::listPage(std::shared_ptr<ListState> state) {
  ListOptions o = state->options;
  if (state->unpaged) {
    o.limit = 0;
    o.continueToken.clear();
  }
  callAsync(listRequest(state->resource, state->ns, o), [this, state](StatusOr<json> page) {
    if (!page.ok()) {
      // An expired continue token: restart as one unpaged list (client-go's pager).
      if (page.status().code() == StatusCode::kGone && !state->options.continueToken.empty() &&
          !state->unpaged) {
        state->unpaged = true;
        state->result = {};
        listPage(state);
        return;
      }
      state->done(page.status());
      return;
    }
    const json& list = *page;
    if (auto items = list.find("items"); items != list.end() && items->is_array()) {
      for (const auto& item : *items) state->result.items.push_back(item);
    }
    std::string cont;
    if (auto md = list.find("metadata"); md != list.end() && md->is_object()) {
      if (auto rv = md->find("resourceVersion"); rv != md->end() && rv->is_string()) {
        state->result.resourceVersion = rv->get<std::string>();
      }
      if (auto c = md->find("continue"); c != md->end() && c->is_string()) {
        cont = c->get<std::string>();
      }
    }
    if (!cont.empty() && !state->unpaged) {
      state->options.continueToken = cont;
      listPage(state);
      return;
    }
    state->done(std::move(state->result));
  });
}

StatusOr<ListResult> Client::listAll(const ResourceRef& resource, std::string_view ns,
                                     ListOptions options) {
  return blockOn<ListResult>([&](ListCallback cb) {
    listAllAsync(resource, std::string(ns), std::move(options), std::move(cb));
  });
}

StatusOr<std::unique_ptr<WatchStream>> Client::watch(const ResourceRef& resource,
                                                     std::string_view ns,
                                                     const WatchOptions& options) {
  ApiRequest req = watchRequest(resource, ns, options);
  if (!req.invalid.ok()) return req.invalid.withContext(req.description);
  for (int attempt = 0;; ++attempt) {
    const StatusOr<Duration> wait = limiter_.reserve();
    if (!wait.ok()) return wait.status().withContext(req.description);
    if (*wait > Duration{0}) {
      auto waited = blockOn<bool>([&](std::function<void(StatusOr<bool>)> cb) {
        std::lock_guard lock(mu_);
        if (stopping_) {
          cb(cancelled(req.description + ": the client is shutting down"));
          return;
        }
        scheduler_.runAfter(*wait, [cb] { cb(true); });
      });
      if (!waited.ok()) return waited.status();
    }
    std::string tokenSent;
    auto h = toHttp(req, tokenSent);
    if (!h.ok()) return h.status();
    auto stream = transport_.openStream(std::move(*h));
    if (!stream.ok()) return stream.status().withContext(req.description);
    const int status = (*stream)->status();
    if (status >= 200 && status < 300) {
      return std::make_unique<WatchStream>(std::move(*stream), req.description);
    }
    std::string body;
    while (body.size() < kMaxErrorBodyBytes) {
      auto chunk = (*stream)->read(options_.requestTimeout);
      if (!chunk.ok() || chunk->empty()) break;
      body += *chunk;
    }
    if (status == 401 && token_ && attempt == 0 && token_->onUnauthorized(tokenSent)) continue;
    return parseApiError(status, body).toStatus(req.description);
  }
}

StatusOr<json> Client::get(const ResourceRef& resource, std::string_view ns,
                           std::string_view name) {
  return call(getRequest(resource, ns, name));
}

StatusOr<json> Client::list(const ResourceRef& resource, std::string_view ns,
                            const ListOptions& options) {
  return call(listRequest(resource, ns, options));
}

StatusOr<json> Client::create(const ResourceRef& resource, std::string_view ns, json object,
                              const WriteOptions& options) {
  return call(createRequest(resource, ns, std::move(object), options));
}

StatusOr<json> Client::createSubresource(const ResourceRef& resource, std::string_view ns,
                                         std::string_view name, std::string_view subresource,
                                         json body, const WriteOptions& options) {
  return call(createSubresourceRequest(resource, ns, name, subresource, std::move(body), options));
}

StatusOr<json> Client::update(const ResourceRef& resource, std::string_view ns, json object,
                              const WriteOptions& options) {
  return call(updateRequest(resource, ns, std::move(object), options));
}

StatusOr<json> Client::updateStatus(const ResourceRef& resource, std::string_view ns, json object) {
  WriteOptions o;
  o.subresource = "status";
  return call(updateRequest(resource, ns, std::move(object), o));
}

StatusOr<json> Client::patch(const ResourceRef& resource, std::string_view ns,
                             std::string_view name, PatchType type, json patch,
                             const WriteOptions& options) {
  return call(patchRequest(resource, ns, name, type, std::move(patch), options));
}

StatusOr<json> Client::remove(const ResourceRef& resource, std::string_view ns,
                              std::string_view name, const DeleteOptions& options) {
  return call(deleteRequest(resource, ns, name, options));
}

}  // namespace kshard::kube
