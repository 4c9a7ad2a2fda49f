// The operation queue's decision (operator/operation_queue.h): what runs next.
#include "operator/operation_queue.h"

#include <gtest/gtest.h>

namespace kshard::manager {
namespace {

QueueFacts idle() {
  QueueFacts f;
  f.acting = true;
  return f;
}

TEST(NextOperation, NothingStartsWhileAnOperationRunsOrAfterTheMapIsGone) {
  QueueFacts f = idle();
  f.requested = RoundRequest{true, false};
  f.empty = false;
  f.running = true;
  EXPECT_EQ(nextOperation(f), NextOperation::kWait);
  f.running = false;
  f.stopped = true;
  EXPECT_EQ(nextOperation(f), NextOperation::kWait);
}

TEST(NextOperation, QueuedOperationsGoBeforeAnOrdinaryRound) {
  QueueFacts f = idle();
  f.requested = RoundRequest{false, false};
  f.empty = false;
  f.frontIsRegister = true;
  EXPECT_EQ(nextOperation(f), NextOperation::kFront);
}

TEST(NextOperation, AnImmediateRoundGoesBeforeWaitingRegistrationsOnly) {
  QueueFacts f = idle();
  f.requested = RoundRequest{true, false};
  f.empty = false;
  f.frontIsRegister = true;
  EXPECT_EQ(nextOperation(f), NextOperation::kRound);
  f.frontIsRegister = false;  // an unregister, a takeover, a removal: first
  EXPECT_EQ(nextOperation(f), NextOperation::kFront);
}

TEST(NextOperation, ARoundRunsOnlyWhenRequestedAndActing) {
  QueueFacts f = idle();
  EXPECT_EQ(nextOperation(f), NextOperation::kWait);
  f.requested = RoundRequest{};
  EXPECT_EQ(nextOperation(f), NextOperation::kRound);
  f.acting = false;
  EXPECT_EQ(nextOperation(f), NextOperation::kWait);
}

TEST(NextOperation, QueuedOperationsRunEvenWhenNotActing) {
  // They answer their callers themselves (NotLeader, or "taking over"): the takeover is one.
  QueueFacts f;
  f.acting = false;
  f.empty = false;
  f.requested = RoundRequest{true, false};
  f.frontIsRegister = true;
  EXPECT_EQ(nextOperation(f), NextOperation::kFront);
}

}  // namespace
}  // namespace kshard::manager
