#include "kube/api_time.h"

#include <gtest/gtest.h>

namespace kshard::kube {
namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

WallTime at(long long secs, long long micros = 0) {
  return WallTime{} +
         std::chrono::duration_cast<WallTime::duration>(seconds(secs) + microseconds(micros));
}

TEST(ApiTimeTest, FormatsMicroTimeWithSixDigitsInUtc) {
  // 2024-05-01T10:00:00Z is 1714557600.
  EXPECT_EQ(formatMicroTime(at(1714557600, 123456)), "2024-05-01T10:00:00.123456Z");
  EXPECT_EQ(formatMicroTime(at(1714557600)), "2024-05-01T10:00:00.000000Z");
  EXPECT_EQ(formatTime(at(1714557600, 999999)), "2024-05-01T10:00:00Z");
}

TEST(ApiTimeTest, ParsesWhatItFormats) {
  const WallTime t = at(1714557600, 42);
  auto parsed = parseTime(formatMicroTime(t));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, t);
}

TEST(ApiTimeTest, ParsesOffsetsAndNanosecondFractions) {
  auto withOffset = parseTime("2024-05-01T12:30:00+02:30");
  ASSERT_TRUE(withOffset.ok());
  EXPECT_EQ(*withOffset, at(1714557600));
  auto nanos = parseTime("2024-05-01T10:00:00.123456789Z");
  ASSERT_TRUE(nanos.ok());
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::nanoseconds>(nanos->time_since_epoch()).count() %
          1000000000,
      123456789);
}

TEST(ApiTimeTest, RejectsMalformedTimesWithAReason) {
  for (const char* bad : {"", "2024-05-01", "2024-05-01T10:00:00", "2024-13-01T10:00:00Z",
                          "2024-05-01T10:00:00.Z", "2024-05-01T10:00:00Zjunk", "yesterday"}) {
    auto parsed = parseTime(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(parsed.status().message().find("RFC 3339"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace kshard::kube

namespace kshard::kube {
namespace {

// Kubernetes' zero time is year 1; nanoseconds since 1970 cannot hold it. Refused, never
// overflowed (UBSan would stop the test).
TEST(ApiTimeTest, RefusesYearsTheClockCannotHold) {
  for (const char* far : {"0001-01-01T00:00:00Z", "1600-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}) {
    auto parsed = parseTime(far);
    ASSERT_FALSE(parsed.ok()) << far;
    EXPECT_NE(parsed.status().message().find("years"), std::string::npos)
        << parsed.status().message();
  }
  EXPECT_TRUE(parseTime("1700-01-01T00:00:00Z").ok());
  EXPECT_TRUE(parseTime("2250-12-31T23:59:59Z").ok());
}

}  // namespace
}  // namespace kshard::kube
