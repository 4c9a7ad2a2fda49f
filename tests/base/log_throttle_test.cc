#include "base/log_throttle.h"

#include <gtest/gtest.h>

namespace kshard {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LogThrottleTest, TheFirstGoesThroughThenOneLinePerIntervalCountingThoseLeftOut) {
  LogThrottle t(seconds(5));
  const SteadyTime t0{seconds(100)};
  EXPECT_EQ(t.occur(t0), 1u);
  for (int i = 1; i <= 9; ++i) EXPECT_EQ(t.occur(t0 + milliseconds(100 * i)), 0u) << i;
  EXPECT_EQ(t.occur(t0 + milliseconds(4999)), 0u);
  EXPECT_EQ(t.occur(t0 + seconds(5)), 11u);  // itself and the 10 left out
  EXPECT_EQ(t.occur(t0 + seconds(6)), 0u);
  EXPECT_EQ(t.occur(t0 + seconds(60)), 2u);  // the one left out and this one, long after
  EXPECT_EQ(t.occur(t0 + seconds(61)), 0u);
}

}  // namespace
}  // namespace kshard
