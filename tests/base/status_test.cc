#include "base/status.h"

#include <gtest/gtest.h>

namespace kshard {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.toString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = conflict("resourceVersion 12 is stale");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.toString(), "Conflict: resourceVersion 12 is stale");
  EXPECT_EQ(s.withContext("persisting status").message(),
            "persisting status: resourceVersion 12 is stale");
}

TEST(StatusOrTest, HoldsValueOrError) {
  StatusOr<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  StatusOr<int> e = notFound("no such pod");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e.valueOr(3), 3);
}

}  // namespace
}  // namespace kshard
