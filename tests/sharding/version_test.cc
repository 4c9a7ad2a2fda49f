#include "sharding/version.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/random.h"

namespace kshard::sharding {
namespace {

TEST(VersionTest, ComparesNumericPartsByValue) {
  EXPECT_GT(compareVersions("1.10.0", "1.9.2"), 0);
  EXPECT_LT(compareVersions("1.9.2", "1.10.0"), 0);
  EXPECT_GT(compareVersions("2.0.0", "1.99.99"), 0);
  EXPECT_GT(compareVersions("1.0.100000000000000000000001", "1.0.99999999999999999999999"), 0);
}

TEST(VersionTest, SplitsOnDotsAndDashes) {
  EXPECT_GT(compareVersions("1.2-10", "1.2-9"), 0);
  EXPECT_GT(compareVersions("2024-01-15", "2023-12-31"), 0);
}

TEST(VersionTest, EqualOnlyForIdenticalStrings) {
  EXPECT_EQ(compareVersions("1.2.3", "1.2.3"), 0);
  EXPECT_EQ(compareVersions("", ""), 0);
  // Equivalent parts still order by bytes, so "different versions" means different labels.
  EXPECT_NE(compareVersions("1.02", "1.2"), 0);
  EXPECT_LT(compareVersions("1-2", "1.2"), 0);   // '-' < '.'
  EXPECT_LT(compareVersions("1.02", "1.2"), 0);  // '0' < '2'
}

TEST(VersionTest, LongerVersionWithTheSamePrefixIsNewer) {
  EXPECT_LT(compareVersions("1.0", "1.0.0"), 0);
  EXPECT_LT(compareVersions("1.0.0", "1.0.0-1"), 0);
  EXPECT_LT(compareVersions("1.0.0", "1.0.0-rc1"), 0);
  EXPECT_LT(compareVersions("1", "1."), 0);  // a trailing empty part is a part
}

TEST(VersionTest, EmptyPartsRankBelowNumbersAndNumbersBelowText) {
  EXPECT_LT(compareVersions("1..2", "1.0.2"), 0);
  EXPECT_LT(compareVersions("1.0.2", "1.a.2"), 0);
  EXPECT_LT(compareVersions("1.9", "1.v2"), 0);
  EXPECT_LT(compareVersions("1.alpha", "1.beta"), 0);
  EXPECT_LT(compareVersions("v1", "v2"), 0);
}

TEST(VersionTest, EmptyVersionIsOlderThanAnyOther) {
  EXPECT_LT(compareVersions("", "0"), 0);
  EXPECT_LT(compareVersions("", "."), 0);
  EXPECT_LT(compareVersions("", "a"), 0);
}

TEST(VersionTest, LeadingZerosDoNotChangeTheNumber) {
  EXPECT_GT(compareVersions("1.010", "1.9"), 0);
  EXPECT_LT(compareVersions("1.009", "1.10"), 0);
}

// The order must be total and consistent, or "newest version" would depend on the pod order.
TEST(VersionTest, IsAStrictTotalOrderOverTrickyVersions) {
  std::vector<std::string> versions = {"",
                                       ".",
                                       "-",
                                       "0",
                                       "00",
                                       "1",
                                       "01",
                                       "1.",
                                       "1-",
                                       "1..2",
                                       "1.0",
                                       "1-0",
                                       "1.0.0",
                                       "1.00.0",
                                       "1.0.0-1",
                                       "1.0.0-rc1",
                                       "1.0.0-rc.1",
                                       "1.2",
                                       "1.02",
                                       "1.10",
                                       "1.9",
                                       "1.a",
                                       "1.A",
                                       "a",
                                       "A",
                                       "v1.2.3",
                                       "v1.2.10",
                                       "2",
                                       "2.0",
                                       "abc",
                                       "ab",
                                       "1.2.3-beta",
                                       "1.2.3-alpha",
                                       "\xC3\xA9t\xC3\xA9"};
  SeededRandom random(11);
  for (int i = 0; i < 300; ++i) {
    std::string v;
    const std::size_t len = random.uniform(7);
    for (std::size_t j = 0; j < len; ++j) v += "0129.-ab"[random.uniform(8)];
    versions.push_back(v);
  }
  for (const std::string& a : versions) {
    EXPECT_EQ(compareVersions(a, a), 0) << a;
    for (const std::string& b : versions) {
      const int ab = compareVersions(a, b);
      const int ba = compareVersions(b, a);
      EXPECT_EQ(ab == 0, a == b) << a << " vs " << b;
      EXPECT_EQ(ab<0, ba> 0) << a << " vs " << b;
    }
  }
  // Transitivity, checked through sorting: a sorted list must be pairwise ordered.
  std::sort(versions.begin(), versions.end(), VersionLess());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  for (std::size_t i = 0; i < versions.size(); ++i) {
    for (std::size_t j = i + 1; j < versions.size(); ++j) {
      EXPECT_LT(compareVersions(versions[i], versions[j]), 0)
          << versions[i] << " vs " << versions[j];
    }
  }
}

}  // namespace
}  // namespace kshard::sharding
