// RoundRunner: one rebalance round at a time (DESIGN.md "Rebalance"), as an explicit state
// machine. A round is an object with a named step; each step does its I/O and names the next,
// and advance() runs it. The decisions between the steps are pure (round_plan.h):
//
//   kDecide      reload if stale; the planner on the stored owners (seeded Random);
//   kPing        ping the pods involved (every pod in periodic rounds and after a takeover, to
//                reconcile), in parallel, within pingTimeout; planRound drops moves touching a
//                pod that failed;
//   kUnassign    unassign in parallel at epoch + 1 (epoch rule 2);
//   kPersist     commitRound drops moves whose unassign failed (the throttle counts them:
//                handoff_throttle.h); persist the new owners at epoch + 1 before telling anyone
//                (write-ahead);
//   kAssign      assign in parallel at the persisted epoch;
//   kCheckFailed the pods that failed a step are checked with the API: dead ones are removed
//                and a round follows at once; otherwise the round is retried after
//                rebalanceRetryInterval;
// and finish(): conditions, an Event, metrics. Every step that acts on pods or the store first
// checks ControllerContext::acting() (epoch rule 7) and ends the round "aborted" otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "operator/controller_operation.h"

namespace kshard::manager {

class RoundRunner : public ControllerOperation {
 public:
  using ControllerOperation::ControllerOperation;

  // Runs one round; `done` ends the operation.
  void run(RoundRequest request, std::function<void()> done);

 private:
  enum class Step { kDecide, kPing, kUnassign, kPersist, kAssign, kCheckFailed };
  struct Round;
  using RoundPtr = std::shared_ptr<Round>;

  // Runs the round's current step.
  void advance(const RoundPtr& round);
  // Sets the next step and runs it.
  void then(const RoundPtr& round, Step next);
  void decide(const RoundPtr& round);
  void ping(const RoundPtr& round);
  void unassign(const RoundPtr& round);
  void persist(const RoundPtr& round);
  void assign(const RoundPtr& round);
  void checkFailed(const RoundPtr& round);
  void finish(const RoundPtr& round, std::string_view result);
  // The repeated-failure throttle's bookkeeping of the round's handoffs, its Events and metrics.
  void recordHandoffs(const RoundPtr& round);
  // status.load: refreshed into `next` when due (shard_loads.h), and the bookkeeping after the
  // write.
  bool refreshLoad(sharding::ShardMap& next, const RoundCommit& commit);
  void loadWritten();
  void warnOfSilentPods();
  // Step 7: the conditions as of now, written only when they changed.
  void writeConditions(const RoundPtr& round);

  std::uint64_t roundSeq_ = 0;
};

}  // namespace kshard::manager
