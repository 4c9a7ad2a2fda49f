#include "base/utf8.h"

#include <gtest/gtest.h>

#include <vector>

namespace kshard {
namespace {

std::vector<char16_t> units(std::string_view s) {
  std::vector<char16_t> out;
  EXPECT_TRUE(forEachUtf16Unit(s, [&](char16_t u) { out.push_back(u); }).ok());
  return out;
}

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(validateUtf8("").ok());
  EXPECT_TRUE(validateUtf8("guild1").ok());
  EXPECT_TRUE(validateUtf8("\xC3\xA9t\xC3\xA9").ok());  // été
  EXPECT_TRUE(validateUtf8("\xE4\xB8\xAD").ok());       // 中
  EXPECT_TRUE(validateUtf8("\xF0\x9F\x98\x80").ok());   // 😀
  EXPECT_TRUE(validateUtf8("\xF4\x8F\xBF\xBF").ok());   // U+10FFFF
}

TEST(Utf8Test, RejectsMalformedSequencesWithTheirOffset) {
  EXPECT_EQ(validateUtf8("ab\x80").message(), "invalid UTF-8 at byte 2");
  EXPECT_FALSE(validateUtf8("\xC0\xAF").ok());          // overlong '/'
  EXPECT_FALSE(validateUtf8("\xE0\x80\xAF").ok());      // overlong
  EXPECT_FALSE(validateUtf8("\xED\xA0\x80").ok());      // surrogate D800
  EXPECT_FALSE(validateUtf8("\xF4\x90\x80\x80").ok());  // above U+10FFFF
  EXPECT_FALSE(validateUtf8("\xF0\x9F\x98").ok());      // truncated
  EXPECT_FALSE(validateUtf8("\xFF").ok());
}

TEST(Utf8Test, DecodesToUtf16CodeUnitsWithSurrogatePairs) {
  EXPECT_EQ(units("a"), std::vector<char16_t>{u'a'});
  EXPECT_EQ(units("\xC3\xA9"), std::vector<char16_t>{0x00E9});
  EXPECT_EQ(units("\xE4\xB8\xAD"), std::vector<char16_t>{0x4E2D});
  EXPECT_EQ(units("\xF0\x9F\x98\x80"), (std::vector<char16_t>{0xD83D, 0xDE00}));
}

TEST(Utf8Test, StopsAtTheFirstMalformedByte) {
  std::vector<char16_t> seen;
  Status s = forEachUtf16Unit("ab\xC3", [&](char16_t u) { seen.push_back(u); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kshard
