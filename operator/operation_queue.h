// OperationQueue: the operations of one ShardMapController run one after another (a takeover, a
// rebalance round, a registration, an unregistration, the removal of dead pods), so that only
// one writes at a time: every status write carries the resourceVersion of the previous one, and
// a round never interleaves with another. It also holds the round requests and the two timers
// that make them (the periodic round, the retry).
//
// nextOperation is the queue's decision, pure; the rest is bookkeeping on the strand.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "operator/controller_context.h"

namespace kshard::manager {

struct RoundRequest {
  bool immediate = false;  // right away, and only the moves that make shards served
  bool resendAll = false;  // re-send every stored assignment (after a takeover)
};

// What the queue does when it may start an operation.
enum class NextOperation {
  kWait,   // nothing to run now
  kRound,  // the requested round, before anything queued
  kFront,  // the operation at the front
};
struct QueueFacts {
  bool running = false;  // an operation has not finished
  bool stopped = false;  // the ShardMap is gone
  bool acting = false;   // ControllerContext::acting()
  std::optional<RoundRequest> requested;
  bool empty = true;
  bool frontIsRegister = false;
};
// Pure. Shards without an owner cannot serve: an immediate round goes before registrations
// still waiting (each would only add one more receiver). Otherwise a thousand pods starting at
// once kept every shard unassigned until the last of them had registered.
NextOperation nextOperation(const QueueFacts& facts);

class OperationQueue {
 public:
  struct Op {
    std::string name;                                // for logs
    std::function<void(std::function<void()>)> run;  // calls its argument once when finished
    Reply
        reply;  // the caller waiting for this operation, answered if it is cancelled; may be empty
  };
  using RoundStarter = std::function<void(RoundRequest, std::function<void()>)>;

  explicit OperationQueue(ControllerContext& c) : c_(c) {}
  ~OperationQueue();  // cancels the timers
  // Runs the rounds the queue starts (set once, before anything is queued).
  void setRoundStarter(RoundStarter start) { startRound_ = std::move(start); }

  void enqueue(Op op, bool front = false);
  // Merges `request` into the pending round request.
  void requestRound(RoundRequest request);
  // Drops the pending round request and the timers, and answers every queued call `answer`.
  void cancelAll(const http::Response& answer);

  // A round after `delay`, unless a retry is already set.
  void retryRoundIn(Duration delay);
  // `action` on the strand after `delay`, replacing any retry set (a takeover's retry).
  void retryIn(Duration delay, std::function<void()> action);
  // The next periodic round, rebalanceInterval from now.
  void schedulePeriodic();

 private:
  void pump();
  void cancelTimers();

  ControllerContext& c_;
  RoundStarter startRound_;
  std::deque<Op> ops_;
  bool opRunning_ = false;
  std::uint64_t opSeq_ = 0;
  std::optional<RoundRequest> requested_;
  Scheduler::TaskId periodicTimer_ = 0;
  Scheduler::TaskId retryTimer_ = 0;
};

}  // namespace kshard::manager
