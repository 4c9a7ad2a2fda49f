#include "examples/counter/counter_app.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

namespace kshard::examples {

using nlohmann::json;

namespace {

// The sidecar process that sends a callback (the app contract, docs/openapi/sidecar.yaml).
constexpr std::string_view kIncarnationHeader = "Kshard-Incarnation";
constexpr std::string_view kTurnHeader = "Kshard-Turn";

http::Response error(int status, std::string_view code, std::string_view message) {
  return http::Response::error(status, code, message);
}

// The answer to a store call that failed: 409 Fenced when a newer owner has the counter.
http::Response storeFailure(const Status& s) {
  if (s.code() == StatusCode::kFailedPrecondition) return error(409, "Fenced", s.message());
  return error(500, "StoreUnavailable", s.message());
}

std::uint64_t headerNumber(const http::Request& r, std::string_view name) {
  std::uint64_t n = 0;
  if (auto v = r.headers.get(name)) std::from_chars(v->data(), v->data() + v->size(), n);
  return n;
}

}  // namespace

CounterApp::CounterApp(CounterStore& store, http::Client& sidecar, const Clock& clock,
                       CounterAppOptions options, Logger logger)
    : store_(store),
      sidecar_(sidecar),
      clock_(clock),
      options_(std::move(options)),
      log_(std::move(logger)) {
  if (!options_.eventLogPath.empty()) {
    eventFd_ =
        ::open(options_.eventLogPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (eventFd_ < 0) log_.error("cannot open the event log", {{"path", options_.eventLogPath}});
  }
}

CounterApp::~CounterApp() {
  if (eventFd_ >= 0) ::close(eventFd_);
}

void CounterApp::addEntityRoutes(http::Server& server) {
  server.route(
      http::Method::kPost, "/kshard/entities/{type}/{id}",
      [this](http::Request r, http::Responder res) { onMessage(std::move(r), std::move(res)); });
  server.route(
      http::Method::kPost, "/kshard/entities/{type}/{id}/stop",
      [this](http::Request r, http::Responder res) { onStop(std::move(r), std::move(res)); });
  server.route(
      http::Method::kPost, "/kshard/entities/{type}/{id}/start",
      [this](http::Request r, http::Responder res) { onStart(std::move(r), std::move(res)); });
  for (const char* what : {"start", "stop"}) {
    server.route(http::Method::kPost, std::string("/kshard/singletons/{name}/") + what,
                 [this, what](http::Request r, http::Responder res) {
                   onSingleton(r, std::move(res), what);
                 });
  }
  server.route(
      http::Method::kPost, "/kshard/singletons/{name}",
      [this](http::Request r, http::Responder res) { onSingleton(r, std::move(res), "message"); });
  server.route(http::Method::kPost, "/kshard/reset",
               [this](http::Request r, http::Responder res) { onReset(r, std::move(res)); });
  server.route(http::Method::kPost, "/kshard/topics/{topic}",
               [this](http::Request r, http::Responder res) { onTopic(r, std::move(res)); });
}

void CounterApp::addPublicRoutes(http::Server& server) {
  server.route(http::Method::kPost, "/counters/{id}/increment",
               [this](http::Request r, http::Responder res) {
                 std::int64_t by = 1;
                 if (auto q = r.queryParam("by")) {
                   auto [ptr, ec] = std::from_chars(q->data(), q->data() + q->size(), by);
                   if (ec != std::errc() || ptr != q->data() + q->size()) {
                     res.send(error(400, "BadRequest", "by must be an integer"));
                     return;
                   }
                 }
                 forward(std::string(r.param("id")), json{{"op", "increment"}, {"by", by}}.dump(),
                         std::move(res));
               });
  server.route(http::Method::kGet, "/counters/{id}", [this](http::Request r, http::Responder res) {
    forward(std::string(r.param("id")), R"({"op":"get"})", std::move(res));
  });
  server.route(http::Method::kPost, "/topics/{topic}/publish",
               [this](http::Request r, http::Responder res) {
                 http::Request req;
                 req.method = http::Method::kPost;
                 req.target = "/v1/topics/" + http::percentEncode(r.param("topic"));
                 if (auto type = r.queryParam("entities")) {
                   req.target += "?entities=" + http::percentEncode(*type);
                 }
                 req.headers.set("Content-Type", "application/json");
                 req.body = std::move(r.body);
                 forward(std::move(req), std::move(res));
               });
  server.route(http::Method::kGet, "/topics",
               [this](http::Request, http::Responder res) { topicCounts(std::move(res)); });
  server.route(http::Method::kGet, "/healthz", [](http::Request, http::Responder res) {
    res.send(http::Response::json(200, R"({"status":"ok"})"));
  });
  addFaultRoutes(server);
}

void CounterApp::addFaultRoutes(http::Server& server) {
  server.route(http::Method::kPut, "/faults/stop/{prefix}",
               [this](http::Request r, http::Responder res) {
                 const std::string prefix(r.param("prefix"));
                 {
                   std::lock_guard lock(mu_);
                   failingStops_.insert(prefix);
                 }
                 log_.warn("stops will fail on purpose", {{"prefix", prefix}});
                 res.send(http::Response::json(200, "{}"));
               });
  server.route(http::Method::kDelete, "/faults/stop/{prefix}",
               [this](http::Request r, http::Responder res) {
                 std::lock_guard lock(mu_);
                 failingStops_.erase(std::string(r.param("prefix")));
                 res.send(http::Response::json(200, "{}"));
               });
  server.route(http::Method::kDelete, "/faults/stop", [this](http::Request, http::Responder res) {
    std::lock_guard lock(mu_);
    failingStops_.clear();
    res.send(http::Response::json(200, "{}"));
  });
}

bool CounterApp::stopFailsLocked(const std::string& id) const {
  return std::any_of(failingStops_.begin(), failingStops_.end(),
                     [&](const std::string& prefix) { return id.starts_with(prefix); });
}

void CounterApp::forward(const std::string& id, std::string body, http::Responder responder) {
  http::Request req;
  req.method = http::Method::kPost;
  req.target = "/v1/entities/counter/" + http::percentEncode(id);
  req.headers.set("Content-Type", "application/json");
  req.body = std::move(body);
  forward(std::move(req), std::move(responder));
}

void CounterApp::forward(http::Request req, http::Responder responder) {
  auto res = std::make_shared<http::Responder>(std::move(responder));
  sidecar_.send(std::move(req), [res](StatusOr<http::Response> r) {
    if (!r.ok()) {
      res->send(error(502, "SidecarUnavailable", r.status().message()));
    } else {
      res->send(std::move(*r));
    }
  });
}

void CounterApp::onMessage(http::Request request, http::Responder responder) {
  if (request.param("type") != "counter") {
    responder.send(error(404, "UnknownEntityType", "this app only has counters"));
    return;
  }
  const std::string id(request.param("id"));
  std::string op = "get";
  std::int64_t by = 1;
  if (!request.body.empty()) {
    auto body = json::parse(request.body, nullptr, false);
    if (!body.is_object() || (body.contains("op") && !body["op"].is_string()) ||
        (body.contains("by") && !body["by"].is_number_integer())) {
      responder.send(error(400, "BadRequest", R"(body must be {"op":"increment"|"get","by":n})"));
      return;
    }
    op = body.value("op", "get");
    by = body.value("by", std::int64_t{1});
  }
  if (op != "increment" && op != "get") {
    responder.send(error(400, "BadRequest", "op must be increment or get"));
    return;
  }

  std::unique_lock lock(mu_);
  auto opened = openTurnLocked(request);
  if (auto* refused = std::get_if<http::Response>(&opened)) {
    lock.unlock();
    responder.send(std::move(*refused));
    return;
  }
  Active& a = *std::get<Active*>(opened);
  if (op == "increment") {
    // Saved before answering, with the epoch as fencing token: an acknowledged increment
    // survives the pod, and a pod that lost the shard cannot overwrite the new owner's state.
    const CounterState next{a.value + by, a.epoch};
    if (Status s = store_.save(id, next); !s.ok()) {
      responder.send(storeFailure(s));
      return;
    }
    a.value = next.value;
  }
  const json out = {{"id", id}, {"value", a.value}, {"pod", options_.pod}, {"epoch", a.epoch}};
  lock.unlock();
  responder.send(http::Response::json(200, out.dump()));
}

std::variant<CounterApp::Active*, http::Response> CounterApp::openTurnLocked(
    const http::Request& request) {
  if (auto stale = staleSender(request)) return std::move(*stale);
  const std::string id(request.param("id"));
  const std::uint64_t turn = headerNumber(request, kTurnHeader);
  if (auto late = lateMessage(id, turn)) return std::move(*late);
  auto it = activate(id, std::string(request.headers.get("Kshard-Shard").value_or("")),
                     headerNumber(request, "Kshard-Epoch"));
  if (!it.ok()) return storeFailure(it.status());
  Active& a = (*it)->second;
  a.turn = std::max(a.turn, turn);
  return &a;
}

StatusOr<std::map<std::string, CounterApp::Active>::iterator> CounterApp::activate(
    const std::string& id, const std::string& shard, std::uint64_t epoch) {
  auto it = active_.find(id);
  // A copy held from an older epoch may be stale: the shard may have been elsewhere meanwhile
  // (a stop that overtook a late message leaves such a copy). Every increment is saved, so the
  // store has the newest value: load it again.
  if (it != active_.end() && it->second.epoch >= epoch) return it;
  auto claimed = claim(id, epoch);
  if (!claimed.ok()) return claimed.status();
  if (it == active_.end()) {
    it = active_.emplace(id, Active{*claimed, epoch}).first;
    stopped_.erase(id);  // from now on, the active counter's turn is the bound
    writeEvent("activate", id, shard, epoch, it->second.value);
  } else {
    it->second = Active{*claimed, epoch, it->second.turn};
  }
  return it;
}

void CounterApp::onStart(http::Request request, http::Responder responder) {
  if (request.param("type") != "counter") {
    responder.send(error(404, "UnknownEntityType", "this app only has counters"));
    return;
  }
  std::unique_lock lock(mu_);
  auto opened = openTurnLocked(request);
  lock.unlock();
  auto* refused = std::get_if<http::Response>(&opened);
  responder.send(refused != nullptr ? std::move(*refused) : http::Response::json(200, "{}"));
}

void CounterApp::onSingleton(const http::Request& request, http::Responder responder,
                             std::string_view what) {
  const std::string name(request.param("name"));
  const std::string shard(request.headers.get("Kshard-Shard").value_or(""));
  std::unique_lock lock(mu_);
  if (auto stale = staleSender(request)) {
    lock.unlock();
    responder.send(std::move(*stale));
    return;
  }
  if (what == "start") startSingleton(name, shard, headerNumber(request, "Kshard-Epoch"));
  if (what == "stop") stopSingleton(name, shard);
  const json out = {
      {"singleton", name}, {"pod", options_.pod}, {"running", singletons_.count(name) > 0}};
  lock.unlock();
  responder.send(http::Response::json(200, out.dump()));
}

void CounterApp::startSingleton(const std::string& name, const std::string& shard,
                                std::uint64_t epoch) {
  // A start of a singleton already running here (a retried start) changes nothing.
  auto [it, started] = singletons_.try_emplace(name, epoch);
  it->second = std::max(it->second, epoch);
  if (started) writeEvent("activate", "singleton-" + name, shard, epoch, 0);
}

void CounterApp::stopSingleton(const std::string& name, const std::string& shard) {
  auto it = singletons_.find(name);
  if (it == singletons_.end()) return;
  writeEvent("stop", "singleton-" + name, shard, it->second, 0);
  singletons_.erase(it);
}

StatusOr<std::int64_t> CounterApp::claim(const std::string& id, std::uint64_t epoch) {
  auto loaded = store_.load(id);
  if (!loaded.ok()) return loaded.status();
  // The epoch is claimed in the store before anything else: a previous owner that still writes
  // (a call it took before its lease ran out) is refused from now on, instead of overwriting
  // what this owner does.
  if (loaded->epoch > epoch) {
    return failedPrecondition("a newer owner (epoch " + std::to_string(loaded->epoch) +
                              ") has this counter");
  }
  if (loaded->epoch < epoch) {
    if (Status s = store_.save(id, {loaded->value, epoch}); !s.ok()) return s;
  }
  return loaded->value;
}

void CounterApp::onStop(http::Request request, http::Responder responder) {
  // No entity of another type ever runs here: it is stopped already. A refusal would keep it
  // active in the sidecar's eyes and fail its shard's handoff.
  if (request.param("type") != "counter") {
    responder.send(http::Response::json(200, "{}"));
    return;
  }
  const std::string id(request.param("id"));
  const std::string shard(request.headers.get("Kshard-Shard").value_or(""));
  std::unique_lock lock(mu_);
  if (auto stale = staleSender(request)) {
    lock.unlock();
    responder.send(std::move(*stale));
    return;
  }
  if (stopFailsLocked(id)) {
    // Before anything is recorded: as an app that failed at the start of its stop.
    lock.unlock();
    responder.send(error(500, "InjectedFault", "stops of counter " + id + " fail on purpose"));
    return;
  }
  auto it = active_.find(id);
  // The bound is the newer of the stop's turn and the last one handled (a stop the sidecar gave
  // up on may come after a newer message).
  recordStop(
      id, std::max(headerNumber(request, kTurnHeader), it == active_.end() ? 0 : it->second.turn));
  if (it != active_.end()) {
    if (Status s = stopLocked(it, shard); !s.ok()) {
      lock.unlock();
      responder.send(error(500, "StoreUnavailable", s.message()));
      return;
    }
  }
  lock.unlock();
  responder.send(http::Response::json(200, "{}"));
}

void CounterApp::onReset(const http::Request& request, http::Responder responder) {
  // Under the lock that messages hold for their whole turn: a message still at work (sent by the
  // sidecar's previous process) finishes first, and its counter is saved with it. Callbacks of
  // any other process than the resetting one are refused from now on (staleSender).
  std::unique_lock lock(mu_);
  std::string from(request.headers.get(kIncarnationHeader).value_or(""));
  // Turn numbers start over with a new sidecar process: what the previous one numbered bounds
  // nothing any more (its late calls are refused by staleSender), neither now nor when the same
  // process repeats this reset after a failure part way. A repeated reset keeps what the
  // process itself numbered, and bounds the counters it stops now by their turns (0: none).
  if (from != resetBy_) {
    stopped_.clear();
    stopOrder_.clear();
    for (auto& [id, active] : active_) active.turn = 0;
  }
  resetBy_ = std::move(from);
  const std::size_t held = active_.size();
  for (auto it = active_.begin(); it != active_.end();) {
    auto next = std::next(it);
    recordStop(it->first, it->second.turn);
    if (Status s = stopLocked(it, ""); !s.ok()) {
      lock.unlock();
      responder.send(error(500, "StoreUnavailable", s.message()));
      return;
    }
    it = next;
  }
  while (!singletons_.empty()) stopSingleton(singletons_.begin()->first, "");
  lock.unlock();
  log_.info("reset: every counter saved and forgotten", {{"counters", held}});
  responder.send(http::Response::json(200, "{}"));
}

std::optional<http::Response> CounterApp::staleSender(const http::Request& request) const {
  const auto from = request.headers.get(kIncarnationHeader);
  if (resetBy_.empty() || !from || *from == resetBy_) return std::nullopt;
  return error(409, "StaleSidecar",
               "sent by sidecar process " + std::string(*from) + ", not " + resetBy_ +
                   ", the one that reset this app");
}

std::optional<http::Response> CounterApp::lateMessage(const std::string& id,
                                                      std::uint64_t turn) const {
  if (turn == 0) return std::nullopt;  // a sidecar that does not number its messages
  std::uint64_t bound = 0;
  if (auto a = active_.find(id); a != active_.end()) {
    bound = a->second.turn;
  } else if (auto s = stopped_.find(id); s != stopped_.end()) {
    bound = s->second.turn;
  }
  if (turn > bound) return std::nullopt;
  return error(409, "LateMessage",
               "turn " + std::to_string(turn) + " of counter " + id + " came after turn or stop " +
                   std::to_string(bound) + " was handled");
}

void CounterApp::recordStop(const std::string& id, std::uint64_t turn) {
  if (turn == 0) return;
  const SteadyTime now = clock_.now();
  // A late message comes within the sidecar's budget for it (at most its ownership lease):
  // records older than kKeptFor go, oldest first, a few at each stop.
  constexpr auto kKeptFor = std::chrono::minutes(10);
  while (!stopOrder_.empty() && now - stopOrder_.front().first > kKeptFor) {
    auto s = stopped_.find(stopOrder_.front().second);
    if (s != stopped_.end() && s->second.at == stopOrder_.front().first) stopped_.erase(s);
    stopOrder_.pop_front();
  }
  Stopped& s = stopped_[id];
  s.turn = std::max(s.turn, turn);
  s.at = now;
  stopOrder_.emplace_back(now, id);
}

Status CounterApp::stopLocked(std::map<std::string, Active>::iterator it,
                              const std::string& shard) {
  if (Status s = store_.save(it->first, {it->second.value, it->second.epoch}); !s.ok()) {
    // Fenced means a newer owner already wrote: this copy is stale and may simply go.
    if (s.code() != StatusCode::kFailedPrecondition) return s;
  }
  writeEvent("stop", it->first, shard, it->second.epoch, it->second.value);
  active_.erase(it);
  return {};
}

void CounterApp::onTopic(const http::Request& request, http::Responder responder) {
  // Any topic is taken: the counter only counts what it receives, for the end-to-end checks.
  const std::string topic(request.param("topic"));
  {
    std::unique_lock lock(mu_);
    if (auto stale = staleSender(request)) {
      lock.unlock();
      responder.send(std::move(*stale));
      return;
    }
  }
  {
    std::lock_guard lock(topicsMu_);
    ++topics_[topic];
  }
  writeLine({{"event", "topic"},
             {"topic", topic},
             {"pod", options_.pod},
             {"publisher", request.headers.get("Kshard-Publisher").value_or("")}});
  responder.send(http::Response::json(200, "{}"));
}

void CounterApp::topicCounts(http::Responder responder) const {
  json counts = json::object();
  {
    std::lock_guard lock(topicsMu_);
    for (const auto& [topic, n] : topics_) counts[topic] = n;
  }
  responder.send(
      http::Response::json(200, json{{"pod", options_.pod}, {"topics", std::move(counts)}}.dump()));
}

std::size_t CounterApp::activeCounters() const {
  std::lock_guard lock(mu_);
  return active_.size();
}

void CounterApp::writeEvent(const std::string& event, const std::string& id,
                            const std::string& shard, std::uint64_t epoch, std::int64_t value) {
  writeLine({{"event", event},
             {"entity", id},
             {"pod", options_.pod},
             {"shard", shard},
             {"epoch", epoch},
             {"value", value}});
}

void CounterApp::writeLine(json event) {
  event["ts_us"] = std::chrono::duration_cast<std::chrono::microseconds>(
                       clock_.wallNow().time_since_epoch())
                       .count();
  const std::string line = event.dump() + "\n";
  // One write(2) with O_APPEND: lines from all pods interleave whole.
  if (eventFd_ >= 0 && ::write(eventFd_, line.data(), line.size()) < 0) {
    log_.warn("event log write failed");
  }
  if (::write(STDOUT_FILENO, line.data(), line.size()) < 0) return;
}

}  // namespace kshard::examples
