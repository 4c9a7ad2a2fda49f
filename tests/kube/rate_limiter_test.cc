#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

#include "kube/backoff.h"

namespace kshard::kube {
namespace {

using std::chrono::milliseconds;

TEST(TokenBucketTest, BurstIsFreeThenRequestsAreSpacedAtQps) {
  ManualClock clock;
  TokenBucket bucket(clock, 10, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*bucket.reserve(), Duration{0});
  EXPECT_EQ(*bucket.reserve(), milliseconds(100));
  EXPECT_EQ(*bucket.reserve(), milliseconds(200));
  clock.advance(milliseconds(200));
  // Both waiters have been served by now; the next one waits its own 100 ms.
  EXPECT_EQ(*bucket.reserve(), milliseconds(100));
}

TEST(TokenBucketTest, RefillsUpToTheBurstOnly) {
  ManualClock clock;
  TokenBucket bucket(clock, 50, 100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*bucket.reserve(), Duration{0});
  clock.advance(std::chrono::hours(1));
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*bucket.reserve(), Duration{0});
  EXPECT_EQ(*bucket.reserve(), milliseconds(20));
}

TEST(TokenBucketTest, ZeroQpsMeansUnlimited) {
  ManualClock clock;
  TokenBucket bucket(clock, 0, 1);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(*bucket.reserve(), Duration{0});
}

TEST(TokenBucketTest, AReservationBeyondTheLongestWaitFailsAndTakesNothing) {
  ManualClock clock;
  TokenBucket bucket(clock, 10, 1, milliseconds(250));
  EXPECT_EQ(*bucket.reserve(), Duration{0});
  EXPECT_EQ(*bucket.reserve(), milliseconds(100));
  EXPECT_EQ(*bucket.reserve(), milliseconds(200));
  for (int i = 0; i < 1000; ++i) {
    const StatusOr<Duration> refused = bucket.reserve();
    ASSERT_FALSE(refused.ok()) << i;
    EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  }
  // The refusals took nothing: once the queue has drained, waits are as short as before.
  clock.advance(milliseconds(200));
  EXPECT_EQ(*bucket.reserve(), milliseconds(100));
}

TEST(BackoffTest, DoublesUpToTheCapWithJitterWithinBounds) {
  SeededRandom random(7);
  Backoff b({milliseconds(800), std::chrono::seconds(30), 2.0, 1.0}, random);
  Duration base = milliseconds(800);
  for (int i = 0; i < 10; ++i) {
    const Duration d = b.next();
    EXPECT_GE(d, base) << i;
    EXPECT_LT(d, 2 * base) << i;
    base = std::min<Duration>(base * 2, std::chrono::seconds(30));
  }
  b.reset();
  EXPECT_LT(b.next(), milliseconds(1600));
}

}  // namespace
}  // namespace kshard::kube
