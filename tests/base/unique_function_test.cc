#include "base/unique_function.h"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kshard {
namespace {

// Counts the live copies of a target, to see that every one is destroyed exactly once.
struct Tracked {
  explicit Tracked(int* counter) : live(counter) { ++*live; }
  Tracked(Tracked&& o) noexcept : live(o.live) { ++*live; }
  Tracked(const Tracked&) = delete;
  ~Tracked() { --*live; }
  int* live;
};

TEST(UniqueFunctionTest, EmptyWhenDefaultOrNullAndThrowsWhenCalled) {
  UniqueFunction<int()> a;
  UniqueFunction<int()> b = nullptr;
  EXPECT_FALSE(a);
  EXPECT_TRUE(b == nullptr);
  EXPECT_THROW(a(), std::bad_function_call);
  std::function<int()> emptyStd;
  UniqueFunction<int()> c = emptyStd;
  EXPECT_FALSE(c);
  int (*nullPointer)() = nullptr;
  UniqueFunction<int()> d = nullPointer;
  EXPECT_FALSE(d);
}

TEST(UniqueFunctionTest, TakesMoveOnlyTargetsAndPassesArgumentsThrough) {
  auto owned = std::make_unique<int>(40);
  UniqueFunction<int(int)> f = [p = std::move(owned)](int n) { return *p + n; };
  EXPECT_EQ(f(2), 42);
  // By-value arguments reach the target as rvalues: a move-only argument works.
  UniqueFunction<std::string(std::unique_ptr<std::string>)> g = [](std::unique_ptr<std::string> s) {
    return *s + "!";
  };
  EXPECT_EQ(g(std::make_unique<std::string>("hi")), "hi!");
  // References stay references.
  int counter = 0;
  UniqueFunction<void(int&)> inc = [](int& n) { ++n; };
  inc(counter);
  inc(counter);
  EXPECT_EQ(counter, 2);
}

TEST(UniqueFunctionTest, MovesSmallAndLargeTargetsAndDestroysEachOnce) {
  int live = 0;
  {
    UniqueFunction<int()> small = [t = Tracked(&live)] { return *t.live; };
    EXPECT_EQ(live, 1);
    std::array<char, UniqueFunction<int()>::kInlineBytes + 1> pad{};
    UniqueFunction<int()> large = [t = Tracked(&live), pad] { return *t.live + pad[0]; };
    EXPECT_EQ(live, 2);

    UniqueFunction<int()> moved = std::move(small);
    EXPECT_FALSE(small);  // NOLINT(bugprone-use-after-move): moved-from is empty, as documented
    EXPECT_EQ(moved(), 2);
    EXPECT_EQ(live, 2);

    UniqueFunction<int()> movedLarge = std::move(large);
    EXPECT_FALSE(large);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(movedLarge(), 2);
    EXPECT_EQ(live, 2);

    moved = std::move(movedLarge);  // destroys moved's target, takes movedLarge's
    EXPECT_EQ(live, 1);
    EXPECT_EQ(moved(), 1);
    moved = nullptr;
    EXPECT_EQ(live, 0);
    EXPECT_FALSE(moved);
  }
  EXPECT_EQ(live, 0);
}

TEST(UniqueFunctionTest, KeepsItsTargetsThroughAVectorThatGrows) {
  int live = 0;
  {
    std::vector<UniqueFunction<int()>> fns;
    for (int i = 0; i < 50; ++i) {
      fns.emplace_back([i, t = Tracked(&live)] { return i; });
    }
    EXPECT_EQ(live, 50);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(fns[static_cast<std::size_t>(i)](), i);
  }
  EXPECT_EQ(live, 0);
}

TEST(UniqueFunctionTest, CallsTheTargetAsAMutableLvalueThroughAConstFunction) {
  // As std::function: a mutable lambda keeps its state between calls, even through a const
  // reference (a const member, a non-mutable lambda's capture).
  const UniqueFunction<int()> next = [n = 0]() mutable { return ++n; };
  EXPECT_EQ(next(), 1);
  EXPECT_EQ(next(), 2);
}

TEST(UniqueFunctionTest, WrapsAStdFunctionAndAFunctionPointer) {
  std::function<int(int)> twice = [](int n) { return 2 * n; };
  UniqueFunction<int(int)> f = twice;
  EXPECT_EQ(f(21), 42);
  int (*negate)(int) = [](int n) { return -n; };
  UniqueFunction<int(int)> g = negate;
  EXPECT_EQ(g(5), -5);
}

}  // namespace
}  // namespace kshard
