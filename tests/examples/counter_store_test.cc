#include "examples/counter/counter_store.h"

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"

namespace kshard::examples {
namespace {

class CounterStoreTest : public ::testing::Test {
 protected:
  CounterStoreTest() : store_(dir_) {}
  // First, so that it is removed last, after everything that writes into it.
  kshard::testing::ScratchDir scratch_{"counter-store"};
  std::string dir_ = scratch_.path();
  CounterStore store_;
};

TEST_F(CounterStoreTest, UnknownCounterStartsAtZero) {
  auto s = store_.load("nobody");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->value, 0);
  EXPECT_EQ(s->epoch, 0u);
}

TEST_F(CounterStoreTest, SavedStateLoadsBack) {
  ASSERT_TRUE(store_.save("a/b é", {41, 3}).ok());
  auto s = store_.load("a/b é");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->value, 41);
  EXPECT_EQ(s->epoch, 3u);
}

TEST_F(CounterStoreTest, OlderEpochIsFenced) {
  ASSERT_TRUE(store_.save("x", {5, 7}).ok());
  Status st = store_.save("x", {9, 6});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.load("x")->value, 5) << "a fenced save changed the state";
  EXPECT_TRUE(store_.save("x", {6, 7}).ok()) << "the same epoch must be able to write";
  EXPECT_TRUE(store_.save("x", {7, 8}).ok());
}

TEST_F(CounterStoreTest, CorruptFileIsAnError) {
  { FILE* f = std::fopen((dir_ + "/bad.json").c_str(), "w"); std::fputs("{nope", f); std::fclose(f); }
  EXPECT_EQ(store_.load("bad").status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kshard::examples
