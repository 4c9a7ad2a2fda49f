// EventRecorder: Kubernetes Events (events.k8s.io/v1) for what a user should see
// ("Rebalanced: moved 12 shards in 84 ms"), as client-go's tools/events recorder:
//
//   - Each event has eventTime (MicroTime), reportingController, reportingInstance, action,
//     reason, regarding (and optionally related), note (cut to 1 KiB at a UTF-8 boundary) and type
//     Normal or Warning. It is written to the regarding object's namespace ("default" for
//     cluster-scoped objects), named "<regarding name>.<hex nanoseconds>".
//   - A repeat of the same (regarding, related, reason, action, type, note) within
//     `seriesWindow` of the previous occurrence does not create a new Event: it becomes a series.
//     The first repeat patches series {count: 2, lastObservedTime} at once (as client-go); later
//     repeats update the count locally and are flushed every `seriesFlushPeriod`. A key unseen for
//     `seriesWindow` is forgotten, so its next occurrence is a new Event.
//   - record() never blocks: events go to a bounded queue (client-go: 1000) and are sent one at a
//     time on the scheduler. When the queue is full the event is dropped and counted. Failed
//     writes are retried a few times (creates and absolute-count patches are idempotent here:
//     AlreadyExists after a retried create counts as success).
//
//   kube::EventRecorder events(api, scheduler, logger,
//                              {.reportingController = "kshard.io/operator",
//                               .reportingInstance = podName});
//   events.record(kube::ObjectReference::of(shardMap), kube::EventType::kNormal, "Rebalanced",
//                 "Rebalance", "moved 12 shards in 84 ms");
//
// Thread-safe. The destructor drops what is still queued and waits for a running step.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "base/logger.h"
#include "base/scheduler.h"
#include "kube/client.h"
#include "kube/lifetime.h"

namespace kshard::kube {

// A reference to an object (core/v1 ObjectReference).
struct ObjectReference {
  std::string apiVersion;
  std::string kind;
  std::string ns;
  std::string name;
  std::string uid;
  std::string resourceVersion;
  std::string fieldPath;

  // From an object's apiVersion, kind and metadata.
  static ObjectReference of(const nlohmann::json& object);
  nlohmann::json toJson() const;
  friend auto operator<=>(const ObjectReference&, const ObjectReference&) = default;
};

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string reportingController;  // "kshard.io/operator"
  std::string reportingInstance;    // the pod name
  std::size_t queueCapacity = 1000;
  Duration seriesWindow = std::chrono::minutes(6);  // client-go's finishTime
  Duration seriesFlushPeriod = std::chrono::seconds(30);
  int maxAttempts = 5;
  Duration retryDelay = std::chrono::seconds(2);
};

inline constexpr std::size_t kMaxEventNoteBytes = 1024;

struct EventRecorderStats {
  std::uint64_t created = 0;
  std::uint64_t patched = 0;
  std::uint64_t dropped = 0;  // queue full, invalid input, or out of attempts
};

class EventRecorder {
 public:
  EventRecorder(Client& client, Scheduler& scheduler, Logger logger, EventRecorderOptions options);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues an event. False when it was dropped: the queue is full, or the input is invalid
  // (empty regarding name, reason or action, or longer than 128 bytes; logged).
  bool record(const ObjectReference& regarding, EventType type, std::string_view reason,
              std::string_view action, std::string_view note,
              const std::optional<ObjectReference>& related = std::nullopt);

  EventRecorderStats stats() const;
  // Events queued or being written.
  std::size_t pending() const;

 private:
  struct Occurrence {
    ObjectReference regarding;
    std::optional<ObjectReference> related;
    EventType type;
    std::string reason, action, note;
    WallTime at;
  };
  using Key = std::tuple<ObjectReference, std::optional<ObjectReference>, EventType, std::string,
                         std::string, std::string>;
  struct Series {
    std::string ns, name;  // the Event written for the first occurrence
    nlohmann::json event;  // as created (for re-creation when it expired server-side)
    int count = 1;
    WallTime lastObserved;
    SteadyTime lastSeen;
    bool dirty = false;  // count not yet written
  };
  enum class Op { kCreate, kPatch };
  struct Write {
    Op op;
    Key key;
    int attempt = 0;
  };

  void pump();
  void process(Occurrence occurrence);
  void send(Write write);
  void onWritten(Write write, Status status);
  void flushSeries();
  void finishStep();
  // Under mu_.
  nlohmann::json buildEvent(const Occurrence& o, std::string& name);

  Client& client_;
  Scheduler& scheduler_;
  Logger logger_;
  const EventRecorderOptions options_;

  mutable std::mutex mu_;
  std::deque<Occurrence> queue_;
  bool busy_ = false;         // a step is scheduled or a write is in flight
  std::deque<Write> writes_;  // series patches waiting for their turn
  std::map<Key, Series> series_;
  EventRecorderStats stats_;
  std::uint64_t lastNameNanos_ = 0;

  Lifetime lifetime_;
};

}  // namespace kshard::kube
