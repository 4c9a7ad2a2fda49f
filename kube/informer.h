// Informer: keeps a local cache of one kind of object in sync with the API server and tells
// handlers what changed, as client-go's shared informer (Reflector + DeltaFIFO + processor).
//
//   1. List (paged) and replace the cache; 2. watch from the list's resourceVersion with
//   allowWatchBookmarks and a random timeoutSeconds in [minWatchTimeout, 2 x minWatchTimeout);
//   3. when the watch ends cleanly, watch again from the last resourceVersion seen (an event's or
//   a bookmark's); when it breaks (a dropped connection, a cut inside an event), back off and
//   resume from there too; 4. when the API says that version is gone (410, or any ERROR event),
//   back off and relist. A relist is reconciled against the cache: objects that are new give
//   onAdd, changed ones onUpdate, vanished ones onDelete with finalStateUnknown (client-go's
//   DeltaFIFO Replace).
//
// No event is lost or reported twice across a reconnect: every change is applied against the
// cache, and an object whose resourceVersion equals the cached one is not reported again.
// Backoff between failures: 800 ms doubling to 30 s with full jitter, reset after 2 minutes
// without failure (client-go's reflector defaults).
//
//   kube::Informer pods(api, scheduler, random, logger,
//                       {.resource = kube::resources::kPods, .ns = "demo",
//                        .labelSelector = "kshard.io/shard-map"});
//   pods.addHandler({.onAdd = [](const json& pod, bool initial) { ... },
//                    .onUpdate = [](const json& before, const json& after) { ... },
//                    .onDelete = [](const json& last, bool finalStateUnknown) { ... }});
//   pods.start();
//   if (!pods.waitForSync(std::chrono::seconds(30))) { ... }
//   kube::ObjectPtr pod = pods.store().get("demo", "counter-0");
//
// Threads: the informer runs two of its own, the reflector (list and watch, blocking) and the
// dispatcher, which calls the handlers one event at a time in the order of the changes. Handlers
// must not block for long; they may read store(), which is already up to date with the event
// they are told about (or newer). The scheduler provides backoff waits and resync timers.
// Thread-safe; start() once, stop() (or the destructor) once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/backoff.h"
#include "kube/client.h"
#include "kube/lifetime.h"
#include "kube/object_store.h"
#include "kube/resource.h"

namespace kshard::kube {

struct InformerOptions {
  ResourceRef resource;
  std::string ns;             // "" = all namespaces (and cluster-scoped resources)
  std::string labelSelector;  // "kshard.io/shard-map"
  std::string fieldSelector;  // "metadata.name=counter"
  // Every period, each cached object is handed to onUpdate(obj, obj) again (level-based
  // controllers use it to re-check the world). Zero: never.
  Duration resyncPeriod{0};
  std::int64_t pageSize = 500;
  std::chrono::seconds minWatchTimeout{300};
  // A watch that sends nothing for its timeout plus this long is considered dead.
  std::chrono::seconds watchReadGrace{60};
  // Applied to every listed or watched object before it is cached and handed to handlers
  // (client-go's SetTransform): drop what the handlers never read, so a cache of many objects
  // stays small. It must keep metadata.name, namespace and resourceVersion. Empty: none.
  std::function<void(nlohmann::json& object)> transform;
  // Lists and watches only the objects' metadata (PartialObjectMetadata): the handlers learn
  // that an object changed, and its resourceVersion, for the bytes of its metadata.
  bool metadataOnly = false;
  BackoffPolicy backoff{std::chrono::milliseconds(800), std::chrono::seconds(30), 2.0, 1.0};
  Duration backoffResetAfter = std::chrono::minutes(2);
};

// A transform for InformerOptions: removes metadata.managedFields, which the API server keeps on
// every object and no controller of ours reads (often the larger part of a small object).
void stripManagedFields(nlohmann::json& object);

struct InformerHandler {
  // `initialList`: the object came with the first list (client-go's isInInitialList).
  std::function<void(const nlohmann::json& object, bool initialList)> onAdd;
  std::function<void(const nlohmann::json& before, const nlohmann::json& after)> onUpdate;
  // `finalStateUnknown`: the deletion was inferred from a relist; `last` is the last version the
  // cache had, not the object's final state.
  std::function<void(const nlohmann::json& last, bool finalStateUnknown)> onDelete;
};

struct InformerStats {
  std::uint64_t lists = 0;      // successful lists (the first one and every relist)
  std::uint64_t watches = 0;    // watches opened
  std::uint64_t failures = 0;   // failed lists, watch opens, broken streams, ERROR events (not
                                // an expiry relisted at once)
  std::string resourceVersion;  // the last one seen
};

class Informer {
 public:
  Informer(Client& client, Scheduler& scheduler, Random& random, Logger logger,
           InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Before start().
  void addHandler(InformerHandler handler);
  void start();
  // Stops both threads and the timers. May wait for a watch being opened (bounded by the
  // transport's request timeout). Handlers are not called after it returns. Not from a handler.
  void stop();

  // True once the first list has been delivered to every handler.
  bool hasSynced() const;
  // Waits (real time) until hasSynced(); false when `timeout` passed first or the informer
  // stopped.
  bool waitForSync(std::chrono::milliseconds timeout) const;

  const ObjectStore& store() const { return store_; }
  InformerStats stats() const;

 private:
  struct Notification {
    enum class Kind { kAdd, kUpdate, kDelete, kSynced } kind;
    ObjectPtr before;
    ObjectPtr after;
    bool flag = false;  // onAdd: initialList; onDelete: finalStateUnknown
  };

  void runReflector();
  void runDispatcher();
  // Lists everything; an empty optional when stopped while waiting.
  std::optional<StatusOr<ListResult>> listInterruptibly();
  // Applies a list to the cache and queues the differences.
  void replace(std::vector<nlohmann::json> items, bool initial);
  // Reads one watch until it ends. OK: ended cleanly; otherwise why it stopped. Sets
  // `relist` when the resourceVersion is unusable.
  Status consume(WatchStream& stream, std::chrono::milliseconds readTimeout, bool& relist);
  void apply(WatchEventType type, nlohmann::json object);
  // Stores `object` under `key` and queues an add (with `initial` as its initialList) or an
  // update; nothing when its resourceVersion is the one already stored.
  void upsert(const std::string& key, nlohmann::json object, bool initial);
  // Waits out the backoff; false when stopped.
  bool waitBackoff();
  // Whether a watch that ended with `ended` is relisted without a backoff.
  bool relistAtOnce(const Status& ended);
  void enqueue(Notification n);
  void scheduleResync();
  bool stopping() const;

  Client& client_;
  Scheduler& scheduler_;
  Random& random_;  // under mu_
  Logger logger_;
  const InformerOptions options_;
  std::vector<InformerHandler> handlers_;  // fixed at start()
  ObjectStore store_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool started_ = false;
  bool stopping_ = false;
  bool synced_ = false;
  std::uint64_t wakeups_ = 0;
  WatchStream* current_ = nullptr;  // the open watch, for stop() to cancel
  std::deque<Notification> queue_;
  Backoff backoff_;
  SteadyTime lastFailure_{};
  bool haveFailed_ = false;
  // The last relist at once after a watch's version expired (see runReflector).
  std::optional<SteadyTime> lastExpiry_;
  InformerStats stats_;

  Lifetime lifetime_;  // scheduler tasks
  std::thread reflector_;
  std::thread dispatcher_;
};

}  // namespace kshard::kube
