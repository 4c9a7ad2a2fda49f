#include "kube/event_recorder.h"

#include <cstdio>
#include <deque>
#include <mutex>
#include <utility>

#include "kube/api_time.h"
#include "kube/object_store.h"

namespace kshard::kube {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxShortField = 128;
constexpr std::size_t kMaxNameBytes = 253;

std::string stringAt(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
std::string truncateUtf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

bool retryable(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kResourceExhausted || code == StatusCode::kInternal;
}

// Takes the front of `items`, unlocks `lock` and hands it to `handle`; false when `items` is
// empty (`lock` stays held).
template <typename T, typename F>
bool handleFront(std::deque<T>& items, std::unique_lock<std::mutex>& lock, F handle) {
  if (items.empty()) return false;
  T item = std::move(items.front());
  items.pop_front();
  lock.unlock();
  handle(std::move(item));
  return true;
}

}  // namespace

ObjectReference ObjectReference::of(const json& object) {
  ObjectReference r;
  if (!object.is_object()) return r;
  r.apiVersion = stringAt(object, "apiVersion");
  r.kind = stringAt(object, "kind");
  r.ns = namespaceOf(object);
  r.name = nameOf(object);
  r.uid = uidOf(object);
  r.resourceVersion = resourceVersionOf(object);
  return r;
}

json ObjectReference::toJson() const {
  json j = json::object();
  if (!apiVersion.empty()) j["apiVersion"] = apiVersion;
  if (!kind.empty()) j["kind"] = kind;
  if (!ns.empty()) j["namespace"] = ns;
  if (!name.empty()) j["name"] = name;
  if (!uid.empty()) j["uid"] = uid;
  if (!resourceVersion.empty()) j["resourceVersion"] = resourceVersion;
  if (!fieldPath.empty()) j["fieldPath"] = fieldPath;
  return j;
}

EventRecorder::EventRecorder(Client& client, Scheduler& scheduler, Logger logger,
                             EventRecorderOptions options)
    : client_(client),
      scheduler_(scheduler),
      logger_(std::move(logger)),
      options_(std::move(options)) {
  scheduler_.runAfter(options_.seriesFlushPeriod, lifetime_.guard([this] { flushSeries(); }));
}

EventRecorder::~EventRecorder() { lifetime_.end(); }

EventRecorderStats EventRecorder::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::size_t EventRecorder::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + writes_.size() + (busy_ ? 1 : 0);
}

bool EventRecorder::record(const ObjectReference& regarding, EventType type,
                           std::string_view reason, std::string_view action, std::string_view note,
                           const std::optional<ObjectReference>& related) {
  const char* invalid = nullptr;
  if (regarding.name.empty()) invalid = "the regarding object has no name";
  if (reason.empty() || reason.size() > kMaxShortField) invalid = "reason must be 1..128 bytes";
  if (action.empty() || action.size() > kMaxShortField) invalid = "action must be 1..128 bytes";
  if (options_.reportingController.empty() ||
      options_.reportingController.size() > kMaxShortField ||
      options_.reportingInstance.size() > kMaxShortField) {
    invalid = "reportingController must be 1..128 bytes and reportingInstance at most 128";
  }
  std::lock_guard lock(mu_);
  if (invalid != nullptr) {
    ++stats_.dropped;
    logger_.error("invalid event dropped",
                  {{"error", invalid}, {"reason", reason}, {"object", regarding.name}});
    return false;
  }
  if (queue_.size() >= options_.queueCapacity) {
    ++stats_.dropped;
    logger_.warn("event queue full; event dropped",
                 {{"reason", reason}, {"object", regarding.name}});
    return false;
  }
  queue_.push_back(Occurrence{regarding, related, type, std::string(reason), std::string(action),
                              truncateUtf8(note, kMaxEventNoteBytes),
                              scheduler_.clock().wallNow()});
  if (!busy_) {
    busy_ = true;
    scheduler_.runAfter(Duration{0}, lifetime_.guard([this] { pump(); }));
  }
  return true;
}

void EventRecorder::finishStep() {
  scheduler_.runAfter(Duration{0}, lifetime_.guard([this] { pump(); }));
}

void EventRecorder::pump() {
  std::unique_lock lock(mu_);
  // One step: a pending write first, else the next occurrence; idle when neither is left.
  if (handleFront(writes_, lock, [this](Write w) { send(std::move(w)); })) return;
  if (handleFront(queue_, lock, [this](Occurrence o) { process(std::move(o)); })) return;
  busy_ = false;
}

json EventRecorder::buildEvent(const Occurrence& o, std::string& name) {
  // client-go names events "<name>.<hex UnixNano>"; kept strictly increasing so that two events
  // at the same instant (a coarse or simulated clock) do not collide.
  auto nanos = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(o.at.time_since_epoch()).count());
  if (nanos <= lastNameNanos_) nanos = lastNameNanos_ + 1;
  lastNameNanos_ = nanos;
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".%llx", static_cast<unsigned long long>(nanos));
  name = o.regarding.name.substr(0, kMaxNameBytes - std::string_view(suffix).size()) + suffix;
  json event = {
      {"apiVersion", "events.k8s.io/v1"},
      {"kind", "Event"},
      {"metadata",
       {{"name", name}, {"namespace", o.regarding.ns.empty() ? "default" : o.regarding.ns}}},
      {"eventTime", formatMicroTime(o.at)},
      {"reportingController", options_.reportingController},
      {"reportingInstance", options_.reportingInstance},
      {"action", o.action},
      {"reason", o.reason},
      {"regarding", o.regarding.toJson()},
      {"note", o.note},
      {"type", o.type == EventType::kWarning ? "Warning" : "Normal"}};
  if (o.related) event["related"] = o.related->toJson();
  return event;
}

void EventRecorder::process(Occurrence o) {
  Key key{o.regarding, o.related, o.type, o.reason, o.action, o.note};
  const SteadyTime now = scheduler_.clock().now();
  std::unique_lock lock(mu_);
  auto it = series_.find(key);
  if (it != series_.end() && now - it->second.lastSeen <= options_.seriesWindow) {
    Series& s = it->second;
    ++s.count;
    s.lastObserved = o.at;
    s.lastSeen = now;
    if (s.count == 2) {
      // The first repeat turns the Event into a series at once, as client-go does.
      lock.unlock();
      send(Write{Op::kPatch, std::move(key)});
      return;
    }
    s.dirty = true;
    lock.unlock();
    finishStep();
    return;
  }
  Series s;
  s.event = buildEvent(o, s.name);
  s.ns = s.event["metadata"]["namespace"].get<std::string>();
  s.lastObserved = o.at;
  s.lastSeen = now;
  series_.insert_or_assign(key, std::move(s));
  lock.unlock();
  send(Write{Op::kCreate, std::move(key)});
}

void EventRecorder::send(Write w) {
  ApiRequest req;
  {
    std::lock_guard lock(mu_);
    auto it = series_.find(w.key);
    if (it == series_.end()) {
      // Forgotten meanwhile; nothing left to write.
      finishStep();
      return;
    }
    const Series& s = it->second;
    if (w.op == Op::kCreate) {
      json event = s.event;
      if (s.count > 1) {
        event["series"] = {{"count", s.count},
                           {"lastObservedTime", formatMicroTime(s.lastObserved)}};
      }
      req = createRequest(resources::kEvents, s.ns, std::move(event));
    } else {
      json patch = {
          {"series", {{"count", s.count}, {"lastObservedTime", formatMicroTime(s.lastObserved)}}}};
      req = patchRequest(resources::kEvents, s.ns, s.name, PatchType::kMerge, std::move(patch));
      it->second.dirty = false;
    }
  }
  client_.callAsync(std::move(req),
                    lifetime_.guard([this, w](StatusOr<json> r) { onWritten(w, r.status()); }));
}

void EventRecorder::onWritten(Write w, Status status) {
  std::unique_lock lock(mu_);
  auto it = series_.find(w.key);
  if (status.ok() || (w.op == Op::kCreate && status.code() == StatusCode::kAlreadyExists)) {
    if (w.op == Op::kCreate) {
      ++stats_.created;
    } else {
      ++stats_.patched;
    }
    lock.unlock();
    finishStep();
    return;
  }
  if (w.op == Op::kPatch && status.code() == StatusCode::kNotFound && it != series_.end()) {
    // The Event expired on the server (its TTL) while the series went on: write it again.
    w.op = Op::kCreate;
    lock.unlock();
    send(std::move(w));
    return;
  }
  if (retryable(status.code()) && w.attempt + 1 < options_.maxAttempts) {
    ++w.attempt;
    if (w.op == Op::kPatch && it != series_.end()) it->second.dirty = true;
    lock.unlock();
    scheduler_.runAfter(options_.retryDelay, lifetime_.guard([this, w] { send(w); }));
    return;
  }
  ++stats_.dropped;
  // A series whose Event was never written must not be patched later.
  if (w.op == Op::kCreate && it != series_.end()) series_.erase(it);
  lock.unlock();
  logger_.warn("cannot write event", {{"error", status.toString()}});
  finishStep();
}

void EventRecorder::flushSeries() {
  const SteadyTime now = scheduler_.clock().now();
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    for (auto it = series_.begin(); it != series_.end();) {
      Series& s = it->second;
      if (s.dirty) {
        s.dirty = false;
        writes_.push_back(Write{Op::kPatch, it->first});
        wake = true;
      } else if (now - s.lastSeen > options_.seriesWindow) {
        it = series_.erase(it);
        continue;
      }
      ++it;
    }
    if (wake && !busy_) {
      busy_ = true;
    } else {
      wake = false;
    }
  }
  if (wake) scheduler_.runAfter(Duration{0}, lifetime_.guard([this] { pump(); }));
  scheduler_.runAfter(options_.seriesFlushPeriod, lifetime_.guard([this] { flushSeries(); }));
}

}  // namespace kshard::kube
