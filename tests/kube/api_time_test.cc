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
