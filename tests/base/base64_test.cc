#include "base/base64.h"

#include <gtest/gtest.h>

namespace kshard {
namespace {

TEST(Base64Test, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64UrlEncode("\xfb\xff"), "-_8");
}

TEST(Base64Test, DecodesAndRoundTrips) {
  EXPECT_EQ(base64Decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(base64Decode("Zm9v\nYmE="), "fooba");
  EXPECT_EQ(base64UrlDecode("-_8"), "\xfb\xff");
  EXPECT_EQ(base64UrlDecode("-_8="), "\xfb\xff");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(base64Decode(base64Encode(all)), all);
  EXPECT_EQ(base64UrlDecode(base64UrlEncode(all)), all);
}

TEST(Base64Test, RejectsMalformedText) {
  EXPECT_FALSE(base64Decode("Zm9").has_value()) << "missing padding";
  EXPECT_FALSE(base64Decode("Zm9v!").has_value());
  EXPECT_FALSE(base64Decode("Z===").has_value());
  EXPECT_FALSE(base64Decode("Zh==").has_value()) << "non-zero leftover bits";
  EXPECT_FALSE(base64UrlDecode("ab+c").has_value()) << "standard alphabet in a URL segment";
  EXPECT_FALSE(base64UrlDecode("a").has_value());
}

}  // namespace
}  // namespace kshard
