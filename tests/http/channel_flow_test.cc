// ChannelFlow: when a channel's server stops and resumes reading, and which deadline it keeps,
// as pure decisions on a given clock.
#include "http/internal/channel_flow.h"

#include <gtest/gtest.h>

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
using Clock = ChannelFlow::Clock;

constexpr milliseconds kTimeout{500};
const Clock::time_point t0 = Clock::time_point() + std::chrono::hours(1);

ChannelFlow flow(std::size_t maxInFlight = 3, std::size_t maxQueued = 100) {
  return ChannelFlow({maxInFlight, maxQueued, kTimeout});
}

TEST(ChannelFlowTest, ReadingPausesAtTheBoundOfRequestsInFlightAndResumesBelowIt) {
  ChannelFlow f = flow();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(f.mayTake(0)) << i;
    f.taken();
  }
  EXPECT_FALSE(f.mayTake(0));
  EXPECT_TRUE(f.paused());
  EXPECT_FALSE(f.resume(0)) << "nothing was answered yet";
  EXPECT_FALSE(f.answered(10));
  EXPECT_TRUE(f.resume(10));
  EXPECT_FALSE(f.paused());
  EXPECT_FALSE(f.resume(10)) << "resumes once per pause";
}

TEST(ChannelFlowTest, ReadingPausesWhileTheQueuedAnswersReachTheirBound) {
  ChannelFlow f = flow();
  ASSERT_TRUE(f.mayTake(0));
  f.taken();
  EXPECT_TRUE(f.answered(150)) << "the last in flight";
  EXPECT_EQ(f.queuedHighWater(), 150u);
  EXPECT_FALSE(f.mayTake(150));
  EXPECT_FALSE(f.resume(100)) << "still at the bound";
  EXPECT_TRUE(f.resume(99));
}

TEST(ChannelFlowTest, AWritesDeadlineIsNotMovedByWhatArrivesMeanwhile) {
  ChannelFlow f = flow();
  f.writeStarted(t0);
  EXPECT_TRUE(f.writing());
  ASSERT_TRUE(f.mayTake(0));
  f.taken();
  f.afterRead(false, t0 + milliseconds(300));
  EXPECT_EQ(f.deadline(t0 + milliseconds(300)), t0 + kTimeout);
  f.answered(10);
  EXPECT_EQ(f.deadline(t0 + milliseconds(400)), t0 + kTimeout);
  EXPECT_FALSE(f.idleExpired());
  f.writeEnded();
  EXPECT_EQ(f.deadline(t0 + milliseconds(600)), t0 + milliseconds(600) + kTimeout) << "idle";
  EXPECT_TRUE(f.idleExpired());
}

TEST(ChannelFlowTest, AFrameMustArriveWithinTheTimeoutOfItsFirstBytes) {
  ChannelFlow f = flow();
  f.afterRead(true, t0);
  f.afterRead(true, t0 + milliseconds(200));  // a byte more; the frame is still incomplete
  EXPECT_EQ(f.deadline(t0 + milliseconds(200)), t0 + kTimeout);
  EXPECT_FALSE(f.idleExpired());
  f.afterRead(false, t0 + milliseconds(300));  // whole now
  EXPECT_EQ(f.deadline(t0 + milliseconds(300)), t0 + milliseconds(300) + kTimeout);
}

TEST(ChannelFlowTest, WhilePausedNoFrameDeadlineRunsAndHandlersMayTakeTheirTime) {
  ChannelFlow f = flow(1);
  ASSERT_TRUE(f.mayTake(0));
  f.taken();
  EXPECT_FALSE(f.mayTake(0));
  f.afterRead(true, t0);
  EXPECT_EQ(f.deadline(t0), ChannelFlow::kNever);
}

}  // namespace
}  // namespace kshard::http
