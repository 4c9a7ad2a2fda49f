// CounterApp: kshard's example app. Its entity type "counter" holds a number.
//
// Two HTTP faces:
//   - entity callbacks for its sidecar, on 127.0.0.1:{app port} (DESIGN.md "App callbacks"):
//       POST /kshard/entities/counter/{id}       {"op":"increment","by":1} or {"op":"get"}
//       POST /kshard/entities/counter/{id}/stop  save and forget the counter
//       POST /kshard/entities/counter/{id}/start load the counter without a message (a
//                                                remembered counter started again)
//       POST /kshard/singletons/{name}/start     the singleton starts here ("ticker" in the
//       POST /kshard/singletons/{name}/stop      example's ShardMap); events "singleton-{name}"
//       POST /kshard/singletons/{name}           a message: answers where it runs
//       POST /kshard/reset                       save and forget every counter (the sidecar
//                                                started: it does not know what this app holds)
//       POST /kshard/topics/{topic}              a topic's publication: counted per topic
//   - a public API for users and load drivers, on the pod IP, which reaches every counter
//     through the local sidecar (POST http://127.0.0.1:7100/v1/entities/counter/{id}):
//       POST /counters/{id}/increment   GET /counters/{id}
//     and the topics (POST http://127.0.0.1:7100/v1/topics/{topic}):
//       POST /topics/{topic}/publish    the sidecar's answer: how many pods accepted it
//       GET  /topics                    {"pod", "topics": {topic: publications received here}}
//     and a fault switch for tests of what the operator does when a handoff keeps failing:
//       PUT /faults/stop/{prefix}   from now on the stop of every counter whose id starts with
//                                   {prefix} answers 500 (the counter stays active), on this pod
//       DELETE /faults/stop/{prefix}, DELETE /faults/stop   stops work again
//     No fault is set unless asked: by default every stop saves and forgets its counter.
//
// A counter is loaded from the CounterStore on its first message (activation), which claims the
// shard's epoch in the store, and saved on every increment and on stop, with that epoch as
// fencing token: a previous owner that still writes is refused. Every activation and
// stop is written as a JSON line, with a timestamp and the pod, to stdout and to an optional
// shared event log that end-to-end checks read to prove no counter ran on two pods at once; so is
// every publication received ("event":"topic", with the topic and the publisher).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include "base/clock.h"
#include "base/logger.h"
#include "examples/counter/counter_store.h"
#include "http/client.h"
#include "http/server.h"

namespace kshard::examples {

struct CounterAppOptions {
  std::string pod;           // this pod's name, written into every event
  std::string eventLogPath;  // shared JSON-lines event log; empty: stdout only
};

class CounterApp {
 public:
  // `sidecar` points at the local sidecar's app API.
  CounterApp(CounterStore& store, http::Client& sidecar, const Clock& clock,
             CounterAppOptions options, Logger logger);
  ~CounterApp();

  void addEntityRoutes(http::Server& server);
  void addPublicRoutes(http::Server& server);
  std::size_t activeCounters() const;

 private:
  struct Active {
    std::int64_t value = 0;
    std::uint64_t epoch = 0;
    std::uint64_t turn = 0;  // the last message's turn number (Kshard-Turn)
  };
  // A counter's last stop: the turn number it named, and when.
  struct Stopped {
    std::uint64_t turn = 0;
    SteadyTime at{};
  };
  void addFaultRoutes(http::Server& server);
  // Whether a stop of counter `id` is to fail (a prefix set by PUT /faults/stop). Under mu_.
  bool stopFailsLocked(const std::string& id) const;
  void onMessage(http::Request request, http::Responder responder);
  void onStop(http::Request request, http::Responder responder);
  // A remembered counter started without a message: loaded as by its first message.
  void onStart(http::Request request, http::Responder responder);
  // The counter a turn (a message or a start) is for: active, loaded as of the turn's epoch and
  // at least at its turn number; or the answer that refuses the turn (a stale sender, a late
  // turn, the store failing). Under mu_.
  std::variant<Active*, http::Response> openTurnLocked(const http::Request& request);
  // The counter `id` of `epoch`, loaded (and its activation written) unless active at that
  // epoch; an error answer when the store failed or a newer owner has it. Under mu_.
  StatusOr<std::map<std::string, Active>::iterator> activate(const std::string& id,
                                                             const std::string& shard,
                                                             std::uint64_t epoch);
  // The singleton callbacks: what = "start", "stop" or "message".
  void onSingleton(const http::Request& request, http::Responder responder, std::string_view what);
  // Starts or stops the singleton `name`, writing its event. Under mu_.
  void startSingleton(const std::string& name, const std::string& shard, std::uint64_t epoch);
  void stopSingleton(const std::string& name, const std::string& shard);
  // Loads counter `id` and claims `epoch` for it in the store: its value, FailedPrecondition
  // when a newer owner claimed it, another error when the store failed. Under mu_.
  StatusOr<std::int64_t> claim(const std::string& id, std::uint64_t epoch);
  void onReset(const http::Request& request, http::Responder responder);
  // The refusal of a callback sent by another sidecar process than the one of the last reset,
  // or nullopt. Under mu_.
  std::optional<http::Response> staleSender(const http::Request& request) const;
  // The refusal of a message older than one this app already handled or stopped for counter
  // `id`, or nullopt. Under mu_.
  std::optional<http::Response> lateMessage(const std::string& id, std::uint64_t turn) const;
  // Records the stop of `id` as of `turn`. Under mu_.
  void recordStop(const std::string& id, std::uint64_t turn);
  // Saves the counter and forgets it (the stop callback's work); an error when it could not be
  // saved (it stays active). Under mu_.
  Status stopLocked(std::map<std::string, Active>::iterator it, const std::string& shard);
  void onTopic(const http::Request& request, http::Responder responder);
  void topicCounts(http::Responder responder) const;
  // Sends `request` to the sidecar and its answer back through `responder`.
  void forward(http::Request request, http::Responder responder);
  void forward(const std::string& id, std::string body, http::Responder responder);
  void writeEvent(const std::string& event, const std::string& id, const std::string& shard,
                  std::uint64_t epoch, std::int64_t value);
  // `event` with its time (ts_us) as one JSON line, to stdout and the event log.
  void writeLine(nlohmann::json event);

  CounterStore& store_;
  http::Client& sidecar_;
  const Clock& clock_;
  CounterAppOptions options_;
  Logger log_;
  int eventFd_ = -1;
  mutable std::mutex mu_;
  std::map<std::string, Active> active_;
  // Stops answered, by counter: a message of a turn not above the stop's was sent before it and
  // came late (its answer given up); it is refused, not allowed to start the counter again.
  std::map<std::string, Stopped> stopped_;
  std::deque<std::pair<SteadyTime, std::string>> stopOrder_;  // stopped_'s records, oldest first
  std::string resetBy_;  // the incarnation of the sidecar process of the last reset
  std::set<std::string> failingStops_;  // id prefixes whose stops answer 500 (addFaultRoutes)
  mutable std::mutex topicsMu_;
  std::map<std::string, std::uint64_t> topics_;  // publications received, by topic
  std::map<std::string, std::uint64_t> singletons_;  // running here, with their epoch
};

}  // namespace kshard::examples
