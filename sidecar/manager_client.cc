#include "sidecar/manager_client.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "protocol/wire.h"

namespace kshard::sidecar {
namespace {

// The longest an unregister is held, whatever the manager announces (its own limit, the
// operator's --max-unregister-hold, is a minute by default).
constexpr Duration kMaxHold = std::chrono::minutes(10);

}  // namespace

struct ManagerClient::Call {
  std::string verb;  // "register" | "unregister" | "renew"
  std::string body;
  SteadyTime sentAt{};  // when the current attempt went out
  std::optional<SteadyTime> deadline;
  SteadyTime started{};
  std::optional<Duration> timeout;  // per attempt, and what a deferral adds to the deadline
  Duration backoff{};
  int deferrals = 0;
  bool once = false;  // no retry: the first answer or failure is the result
  int attempts = 0;
  std::function<void(StatusOr<http::Response>)> done;
};

ManagerClient::ManagerClient(Identity self, RoutingTable& table, ClientFactory factory,
                             Scheduler& scheduler, Random& random, Logger logger, Options options,
                             std::function<std::string()> authorization)
    : self_(std::move(self)),
      table_(table),
      factory_(std::move(factory)),
      scheduler_(scheduler),
      log_(std::move(logger)),
      options_(std::move(options)),
      authorization_(std::move(authorization)),
      random_(random) {}

ManagerClient::~ManagerClient() { stop(); }

void ManagerClient::stop() {
  std::map<Scheduler::TaskId, std::shared_ptr<Call>> waiting;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    waiting.swap(waiting_);
  }
  for (auto& [id, call] : waiting) {
    if (scheduler_.cancel(id)) call->done(cancelled("the sidecar is shutting down"));
  }
  lifetime_.end();
}

void ManagerClient::registerPod(std::function<void(StatusOr<std::uint64_t>)> done) {
  auto call = std::make_shared<Call>();
  call->verb = "register";
  call->body = protocol::encode(protocol::RegisterRequest{self_.pod, self_.uid, self_.peerAddress,
                                                          self_.version, self_.incarnation});
  call->backoff = options_.initialBackoff;
  call->done = [done = std::move(done)](StatusOr<http::Response> r) {
    if (!r.ok()) return done(r.status());
    auto e = protocol::decodeEpochResponse(r->body);
    if (!e.ok()) return done(e.status().withContext("register answer"));
    done(e->epoch);
  };
  attempt(call);
}

void ManagerClient::unregisterPod(Duration timeout,
                                  std::function<void(StatusOr<protocol::EpochResponse>)> done) {
  auto call = std::make_shared<Call>();
  call->verb = "unregister";
  call->body = protocol::encode(protocol::UnregisterRequest{self_.pod, self_.uid});
  call->started = scheduler_.clock().now();
  call->deadline = call->started + timeout;
  call->timeout = timeout;
  call->backoff = options_.initialBackoff;
  call->done = [done = std::move(done)](StatusOr<http::Response> r) {
    if (!r.ok()) return done(r.status());
    auto e = protocol::decodeEpochResponse(r->body);
    if (!e.ok()) return done(e.status().withContext("unregister answer"));
    done(*e);
  };
  attempt(call);
}

void ManagerClient::renew(Duration timeout, std::function<void(Status)> done) {
  auto call = std::make_shared<Call>();
  call->verb = "renew";
  call->body = protocol::encode(self_.target());
  call->once = true;
  call->timeout = timeout;
  call->done = [done = std::move(done)](StatusOr<http::Response> r) { done(r.status()); };
  attempt(call);
}

void ManagerClient::readChanges(const std::string& since, const std::string& want,
                                Duration timeout,
                                std::function<void(StatusOr<http::Response>)> done) {
  http::Request req = managerRequest(http::Method::kGet, "assignments?since=" +
                                                            http::percentEncode(since) +
                                                            "&want=" + http::percentEncode(want));
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  http::Client* client = nullptr;
  std::string why;
  {
    std::lock_guard lock(mu_);
    const std::string address = managerAddress();
    if (stopped_ || address.empty()) {
      why = stopped_ ? "the sidecar is shutting down" : "no manager is known yet";
    } else {
      client = &clientFor(address);
    }
  }
  // Not under mu_: `done` may start other calls.
  if (client == nullptr) return done(unavailable(why));
  client->send(std::move(req), lifetime_.guard(std::move(done)));
}

http::Request ManagerClient::managerRequest(http::Method method, const std::string& verb) const {
  http::Request req;
  req.method = method;
  req.target = "/v1/shardmaps/" + self_.shardMap.ns + "/" + self_.shardMap.name + "/" + verb;
  if (method == http::Method::kPost) req.headers.set("Content-Type", "application/json");
  if (std::string value = authorization_ ? authorization_() : std::string(); !value.empty()) {
    req.headers.set(std::string(protocol::kAuthorizationHeader), std::move(value));
  }
  return req;
}

std::string ManagerClient::managerAddress() const {
  if (!options_.managerOverride.empty()) return options_.managerOverride;
  const auto snapshot = table_.snapshot();
  return snapshot->manager ? snapshot->manager->address : std::string();
}

http::Client& ManagerClient::clientFor(const std::string& address) {
  auto it = clients_.find(address);
  if (it == clients_.end()) {
    it = clients_.emplace(address, factory_("http://" + address)).first;
  }
  return *it->second;
}

void ManagerClient::attempt(const std::shared_ptr<Call>& call) {
  const std::string address = managerAddress();
  if (address.empty()) {
    retryLater(call, "the ShardMap names no manager yet");
    return;
  }
  http::Request req = managerRequest(http::Method::kPost, call->verb);
  req.body = call->body;
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      !call->timeout ? options_.requestTimeout
      : call->once   ? *call->timeout
                     : std::max(*call->timeout, options_.requestTimeout));
  ++call->attempts;
  http::Client* client;
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      call->done(cancelled("the sidecar is shutting down"));
      return;
    }
    client = &clientFor(address);
  }
  call->sentAt = scheduler_.clock().now();
  client->send(std::move(req), lifetime_.guard([this, call, address](StatusOr<http::Response> r) {
    onAnswer(call, address, std::move(r));
  }));
}

void ManagerClient::onAnswer(const std::shared_ptr<Call>& call, const std::string& address,
                             StatusOr<http::Response> r) {
  if (!r.ok()) {
    retryLater(call, address + ": " + r.status().toString());
    return;
  }
  if (r->status == 200) {
    if (call->verb != "unregister" && options_.onConfirmed) options_.onConfirmed(call->sentAt);
    if (call->verb != "renew") {
      log_.info(
          call->verb == "register" ? "registered" : "unregistered",
          {{"manager", address}, {"attempts", call->attempts}, {"deferrals", call->deferrals}});
    }
    call->done(std::move(r));
    return;
  }
  if (deferred(call, *r)) return;
  std::string code;
  std::string message = r->body.substr(0, 256);
  auto body = nlohmann::json::parse(r->body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    code = body["error"].value("code", "");
    message = body["error"].value("message", message);
  }
  if (call->once) {
    // A renew the manager refuses because it does not know this pod as this incarnation
    // (unregistered, removed as dead, or registered anew): NotFound, the caller registers.
    const bool unknown =
        (r->status == 409 && code == protocol::errors::kWrongTarget) ||
        ((r->status == 404 || r->status == 403) && code == protocol::errors::kPodNotAlive);
    const std::string why = call->verb + ": " + std::to_string(r->status) + " " + message;
    call->done(unknown ? notFound(why) : unavailable(why));
    return;
  }
  // 4xx other than "not alive yet" means the request itself is wrong: no retry will help.
  // 401 is retried: the kubelet may not have written (or rotated) the token yet.
  const bool permanent = r->status >= 400 && r->status < 500 && r->status != 401 &&
                         r->status != 404 && r->status != 403 && r->status != 409 &&
                         r->status != 429;
  if (permanent) {
    log_.error("manager refused",
               {{"verb", call->verb}, {"status", r->status}, {"code", code}, {"message", message}});
    call->done(Status(StatusCode::kFailedPrecondition,
                      call->verb + " refused: " + std::to_string(r->status) + " " + message));
    return;
  }
  retryLater(call, address + ": " + std::to_string(r->status) + " " + code + " " + message);
}

bool ManagerClient::deferred(const std::shared_ptr<Call>& call, const http::Response& r) {
  if (call->verb != "unregister" || r.status != 409 || !call->timeout) return false;
  auto deferral = protocol::decodeUnregisterDeferred(r.body);
  if (!deferral.ok()) return false;  // another 409: retried with backoff
  const SteadyTime now = scheduler_.clock().now();
  const Duration holdLeft = std::chrono::milliseconds(deferral->deferredForMs);
  // The manager bounds the hold; the handoff that follows it gets the call's own timeout. Only
  // a hold still announced moves the deadline, and never past kMaxHold after the call began,
  // whatever the manager says.
  if (call->deadline && holdLeft > Duration::zero()) {
    call->deadline = std::min(std::max(*call->deadline, now + holdLeft + *call->timeout),
                              call->started + kMaxHold + *call->timeout);
  }
  if (call->deferrals++ == 0) {
    log_.info(
        "unregister held by the manager: this pod keeps serving its shards until newer "
        "pods have registered",
        {{"version", deferral->version},
         {"starting_pods", deferral->startingPods},
         {"at_most_ms", deferral->deferredForMs}});
  }
  // Asked again when the manager said, within sane bounds whatever it said.
  const Duration after = std::clamp<Duration>(std::chrono::milliseconds(deferral->retryAfterMs),
                                              std::chrono::milliseconds(100), options_.maxBackoff);
  retryLater(call, "deferred: " + deferral->message, after);
  return true;
}

void ManagerClient::retryLater(const std::shared_ptr<Call>& call, const std::string& why,
                               std::optional<Duration> after) {
  if (call->once) {
    call->done(unavailable(call->verb + " failed: " + why));
    return;
  }
  Duration wait;
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      call->done(cancelled("the sidecar is shutting down"));
      return;
    }
    const auto half = call->backoff / 2;
    wait = after ? *after
                 : half + Duration(static_cast<Duration::rep>(
                              random_.uniform(static_cast<std::uint64_t>(half.count()) + 1)));
  }
  if (call->deadline && scheduler_.clock().now() + wait >= *call->deadline) {
    call->done(deadlineExceeded(call->verb + " did not succeed in time; last: " + why));
    return;
  }
  if (!after) {
    log_.info("manager call failed, retrying",
              {{"verb", call->verb}, {"attempts", call->attempts}, {"reason", why}});
    call->backoff = std::min(call->backoff * 2, options_.maxBackoff);
  }
  std::lock_guard lock(mu_);
  auto id = std::make_shared<Scheduler::TaskId>(0);
  *id = scheduler_.runAfter(wait, lifetime_.guard([this, call, id] {
    {
      std::lock_guard inner(mu_);
      waiting_.erase(*id);
    }
    attempt(call);
  }));
  waiting_.emplace(*id, call);
}

void ManagerClient::reportUnreachable(const std::string& pod) {
  std::string address;
  http::Client* client;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    const SteadyTime now = scheduler_.clock().now();
    auto it = lastReport_.find(pod);
    if (it != lastReport_.end() && now - it->second < options_.reportInterval) return;
    lastReport_[pod] = now;
    address = managerAddress();
    if (address.empty()) return;
    client = &clientFor(address);
  }
  http::Request req = managerRequest(http::Method::kPost, "notify-unhealthy");
  req.body = protocol::encode(protocol::NotifyUnhealthyRequest{pod});
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.requestTimeout);
  log_.warn("reporting unreachable pod", {{"pod", pod}});
  client->send(std::move(req), lifetime_.guard([this, pod](StatusOr<http::Response> r) {
    if (!r.ok() || r->status >= 300) {
      log_.warn(
          "notify-unhealthy failed",
          {{"pod", pod}, {"error", r.ok() ? std::to_string(r->status) : r.status().toString()}});
    }
  }));
}

}  // namespace kshard::sidecar
