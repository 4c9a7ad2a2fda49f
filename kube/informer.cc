#include "kube/informer.h"

#include <map>
#include <optional>
#include <utility>

#include "kube/api_error.h"

namespace kshard::kube {

using nlohmann::json;

Informer::Informer(Client& client, Scheduler& scheduler, Random& random, Logger logger,
                   InformerOptions options)
    : client_(client),
      scheduler_(scheduler),
      random_(random),
      logger_(logger.withFields({{"resource", options.resource.displayName()},
                                 {"namespace", options.ns},
                                 {"label_selector", options.labelSelector},
                                 {"field_selector", options.fieldSelector}})),
      options_(std::move(options)),
      backoff_(options_.backoff, random) {}

Informer::~Informer() { stop(); }

void Informer::addHandler(InformerHandler handler) {
  std::lock_guard lock(mu_);
  if (started_) {
    logger_.error("informer handler added after start; ignored");
    return;
  }
  handlers_.push_back(std::move(handler));
}

void Informer::start() {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  reflector_ = std::thread([this] { runReflector(); });
  dispatcher_ = std::thread([this] { runDispatcher(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_ || stopping_) {
      stopping_ = true;
      return;
    }
    stopping_ = true;
    if (current_ != nullptr) current_->cancel();
  }
  cv_.notify_all();
  // After end() no timer task touches this object; the reflector may still be blocked opening a
  // watch, which the transport bounds.
  lifetime_.end();
  reflector_.join();
  dispatcher_.join();
}

bool Informer::stopping() const {
  std::lock_guard lock(mu_);
  return stopping_;
}

bool Informer::hasSynced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool Informer::waitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return synced_ || stopping_; });
  return synced_;
}

InformerStats Informer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Informer::enqueue(Notification n) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(n));
  }
  cv_.notify_all();
}

// A watch that ran until its version expired (410 Gone) failed in nothing: the server's window
// moved on. Relisting after the failure backoff would leave the cache stale for up to its
// ceiling, and a backoff grown during an API server outage lasts two minutes past it (a sidecar
// routing by a stale map meanwhile). Once per 10 s it relists at once; more often, the server is
// misbehaving and the backoff applies.
bool Informer::relistAtOnce(const Status& ended) {
  if (ended.code() != StatusCode::kGone) return false;
  const SteadyTime now = scheduler_.clock().now();
  std::lock_guard lock(mu_);
  if (lastExpiry_ && now - *lastExpiry_ < std::chrono::seconds(10)) return false;
  lastExpiry_ = now;
  logger_.info("watch version expired; relisting", {{"error", ended.toString()}});
  return true;
}

bool Informer::waitBackoff() {
  Duration delay;
  std::uint64_t target;
  {
    std::lock_guard lock(mu_);
    ++stats_.failures;
    const SteadyTime now = scheduler_.clock().now();
    // A long healthy stretch starts the backoff over (client-go: 2 minutes).
    if (haveFailed_ && now - lastFailure_ >= options_.backoffResetAfter) backoff_.reset();
    haveFailed_ = true;
    lastFailure_ = now;
    delay = backoff_.next();
    target = wakeups_ + 1;
  }
  scheduler_.runAfter(delay, lifetime_.guard([this] {
    {
      std::lock_guard lock(mu_);
      ++wakeups_;
    }
    cv_.notify_all();
  }));
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopping_ || wakeups_ >= target; });
  return !stopping_;
}

std::optional<StatusOr<ListResult>> Informer::listInterruptibly() {
  struct Pending {
    std::optional<StatusOr<ListResult>> result;
  };
  auto pending = std::make_shared<Pending>();
  ListOptions o;
  o.labelSelector = options_.labelSelector;
  o.fieldSelector = options_.fieldSelector;
  o.limit = options_.pageSize;
  o.metadataOnly = options_.metadataOnly;
  client_.listAllAsync(options_.resource, options_.ns, o,
                       lifetime_.guard([this, pending](StatusOr<ListResult> r) {
                         {
                           std::lock_guard lock(mu_);
                           pending->result.emplace(std::move(r));
                         }
                         cv_.notify_all();
                       }));
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopping_ || pending->result.has_value(); });
  if (stopping_) return std::nullopt;
  return std::move(pending->result);
}

void stripManagedFields(json& object) {
  auto metadata = object.find("metadata");
  if (metadata != object.end() && metadata->is_object()) metadata->erase("managedFields");
}

void Informer::replace(std::vector<json> items, bool initial) {
  std::map<std::string, bool> listed;
  for (auto& item : items) {
    if (options_.transform) options_.transform(item);
    const std::string key = keyOf(item);
    if (nameOf(item).empty()) {
      logger_.warn("listed object without metadata.name; skipped");
      continue;
    }
    listed[key] = true;
    upsert(key, std::move(item), initial);
  }
  for (const auto& key : store_.keys()) {
    if (listed.count(key) != 0) continue;
    // Deleted while we were not watching: the last state we know is all there is.
    if (ObjectPtr gone = store_.erase(key)) {
      enqueue({Notification::Kind::kDelete, std::move(gone), nullptr, true});
    }
  }
}

void Informer::apply(WatchEventType type, json object) {
  if (options_.transform) options_.transform(object);
  const std::string key = keyOf(object);
  if (type == WatchEventType::kDeleted) {
    if (ObjectPtr before = store_.erase(key)) {
      enqueue({Notification::Kind::kDelete, nullptr,
               std::make_shared<const json>(std::move(object)), false});
    }
    return;
  }
  upsert(key, std::move(object), false);
}

void Informer::upsert(const std::string& key, json object, bool initial) {
  ObjectPtr now = std::make_shared<const json>(std::move(object));
  ObjectPtr before = store_.getByKey(key);
  // Unchanged since we last saw it: nothing to report (dedupe across a relist, or a watch event
  // already seen).
  if (before && resourceVersionOf(*before) == resourceVersionOf(*now)) return;
  store_.put(key, now);
  if (before) {
    enqueue({Notification::Kind::kUpdate, std::move(before), std::move(now), false});
  } else {
    enqueue({Notification::Kind::kAdd, nullptr, std::move(now), initial});
  }
}

Status Informer::consume(WatchStream& stream, std::chrono::milliseconds readTimeout, bool& relist) {
  for (;;) {
    auto next = stream.next(readTimeout);
    if (!next.ok()) return next.status();
    if (!next->has_value()) return {};
    WatchEvent& ev = **next;
    if (ev.type == WatchEventType::kError) {
      // 410 Gone/Expired: the version is compacted away. client-go relists on any ERROR event.
      relist = true;
      return watchErrorStatus(ev);
    }
    const std::string rv = resourceVersionOf(ev.object);
    if (ev.type != WatchEventType::kBookmark) {
      if (nameOf(ev.object).empty()) {
        logger_.warn("watch event without metadata.name; skipped",
                     {{"type", watchEventTypeName(ev.type)}});
        continue;
      }
      apply(ev.type, std::move(ev.object));
    }
    if (!rv.empty()) {
      std::lock_guard lock(mu_);
      stats_.resourceVersion = rv;
    }
  }
}

void Informer::runReflector() {
  bool relist = true;
  bool initial = true;
  while (!stopping()) {
    if (relist) {
      auto listed = listInterruptibly();
      if (!listed) break;
      if (!listed->ok()) {
        logger_.warn("list failed", {{"error", listed->status().toString()}});
        if (!waitBackoff()) break;
        continue;
      }
      replace(std::move((*listed)->items), initial);
      {
        std::lock_guard lock(mu_);
        ++stats_.lists;
        stats_.resourceVersion = (*listed)->resourceVersion;
      }
      if (initial) enqueue({Notification::Kind::kSynced, nullptr, nullptr, false});
      initial = false;
      relist = false;
    }

    WatchOptions wo;
    wo.labelSelector = options_.labelSelector;
    wo.fieldSelector = options_.fieldSelector;
    wo.allowWatchBookmarks = true;
    wo.metadataOnly = options_.metadataOnly;
    {
      std::lock_guard lock(mu_);
      wo.resourceVersion = stats_.resourceVersion;
      // Spread watch restarts of many clients over time, as client-go does.
      const auto min = options_.minWatchTimeout.count();
      wo.timeout = std::chrono::seconds(min + static_cast<long long>(random_.uniform(
                                                  static_cast<std::uint64_t>(min > 0 ? min : 1))));
    }
    auto opened = client_.watch(options_.resource, options_.ns, wo);
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kGone) relist = true;
      logger_.warn("watch failed", {{"error", opened.status().toString()},
                                    {"resource_version", wo.resourceVersion}});
      if (!waitBackoff()) break;
      continue;
    }
    std::unique_ptr<WatchStream> stream = std::move(*opened);
    bool stopped;
    {
      std::lock_guard lock(mu_);
      ++stats_.watches;
      stopped = stopping_;
      if (!stopped) current_ = stream.get();
    }
    if (stopped) {
      stream->cancel();  // stop() came while the watch was being opened
      break;
    }
    const auto readTimeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(wo.timeout + options_.watchReadGrace);
    Status ended = consume(*stream, readTimeout, relist);
    {
      std::lock_guard lock(mu_);
      current_ = nullptr;
    }
    if (stopping()) break;
    if (ended.ok()) continue;  // the server's timeoutSeconds: watch again at once
    if (relistAtOnce(ended)) continue;
    if (ended.code() == StatusCode::kDeadlineExceeded) stream->cancel();
    logger_.info(relist ? "watch ended; relisting" : "watch broke; resuming",
                 {{"error", ended.toString()}});
    if (!waitBackoff()) break;
  }
}

void Informer::scheduleResync() {
  if (options_.resyncPeriod <= Duration{0}) return;
  scheduler_.runAfter(options_.resyncPeriod, lifetime_.guard([this] {
    if (stopping()) return;
    for (auto& obj : store_.list()) {
      enqueue({Notification::Kind::kUpdate, obj, obj, false});
    }
    scheduleResync();
  }));
}

void Informer::runDispatcher() {
  for (;;) {
    Notification n;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      n = std::move(queue_.front());
      queue_.pop_front();
    }
    if (n.kind == Notification::Kind::kSynced) {
      // The resync timer runs from the moment of sync; armed first so that a caller woken by
      // waitForSync() finds it in place.
      scheduleResync();
      {
        std::lock_guard lock(mu_);
        synced_ = true;
      }
      cv_.notify_all();
      continue;
    }
    for (const auto& h : handlers_) {
      // One top-level catch per unit of work: a throwing handler loses this event, not the
      // informer.
      try {
        switch (n.kind) {
          case Notification::Kind::kAdd:
            if (h.onAdd) h.onAdd(*n.after, n.flag);
            break;
          case Notification::Kind::kUpdate:
            if (h.onUpdate) h.onUpdate(*n.before, *n.after);
            break;
          case Notification::Kind::kDelete:
            if (h.onDelete) h.onDelete(n.flag ? *n.before : *n.after, n.flag);
            break;
          case Notification::Kind::kSynced:
            break;
        }
      } catch (const std::exception& e) {
        logger_.error("informer handler threw", {{"error", e.what()}});
      }
    }
  }
}

}  // namespace kshard::kube
