#include "base/random.h"

#include <gtest/gtest.h>

#include <set>

namespace kshard {
namespace {

TEST(SeededRandomTest, SameSeedSameSequence) {
  SeededRandom a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(SeededRandomTest, KnownFirstValueIsPortable) {
  // Pinned so that a change of generator (which would change every seeded plan) is noticed.
  SeededRandom r(7);
  EXPECT_EQ(r.next(), SeededRandom(7).next());
  const std::uint64_t first = SeededRandom(0).next();
  EXPECT_EQ(first, 0x99EC5F36CB75F2B4ULL);
}

TEST(SeededRandomTest, UniformStaysInRangeAndCoversIt) {
  SeededRandom r(1);
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto v = r.uniform(6);
    ASSERT_LT(v, 6u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 6u);
  for (int i = 0; i < 100; ++i) {
    const double u = r.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace kshard
