#include "kube/api_error.h"

#include <gtest/gtest.h>

namespace kshard::kube {
namespace {

TEST(ApiErrorTest, ParsesStatusBodyIntoReasonMessageAndCode) {
  const std::string body = R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"Operation cannot be fulfilled on leases.coordination.k8s.io \"op\": the object has been modified; please apply your changes to the latest version and try again",
    "reason":"Conflict","details":{"name":"op","group":"coordination.k8s.io","kind":"leases"},"code":409})";
  ApiError e = parseApiError(409, body);
  EXPECT_EQ(e.reason, "Conflict");
  EXPECT_EQ(e.code(), StatusCode::kConflict);
  Status s = e.toStatus("update leases.coordination.k8s.io demo/op");
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(),
            "update leases.coordination.k8s.io demo/op: Conflict (HTTP 409): Operation cannot be "
            "fulfilled on leases.coordination.k8s.io \"op\": the object has been modified; please "
            "apply your changes to the latest version and try again");
}

TEST(ApiErrorTest, AlreadyExistsIsNotAConflictAlthoughBothAre409) {
  ApiError e = parseApiError(409, R"({"kind":"Status","reason":"AlreadyExists","code":409,
                                       "message":"pods \"a\" already exists"})");
  EXPECT_EQ(e.code(), StatusCode::kAlreadyExists);
}

TEST(ApiErrorTest, MapsEveryDocumentedReason) {
  const std::pair<const char*, StatusCode> cases[] = {
      {"NotFound", StatusCode::kNotFound},
      {"Gone", StatusCode::kGone},
      {"Expired", StatusCode::kGone},
      {"Forbidden", StatusCode::kPermissionDenied},
      {"Unauthorized", StatusCode::kUnauthenticated},
      {"Invalid", StatusCode::kInvalidArgument},
      {"TooManyRequests", StatusCode::kResourceExhausted},
      {"ServiceUnavailable", StatusCode::kUnavailable},
      {"Timeout", StatusCode::kDeadlineExceeded},
      {"ServerTimeout", StatusCode::kDeadlineExceeded},
      {"InternalError", StatusCode::kInternal},
      {"BadRequest", StatusCode::kInvalidArgument},
  };
  for (const auto& [reason, code] : cases) {
    EXPECT_EQ(statusCodeFor(reason, 500), code) << reason;
  }
}

TEST(ApiErrorTest, FallsBackToTheHttpStatusWhenTheBodyIsNotAStatus) {
  ApiError e = parseApiError(503, "upstream connect error\n");
  EXPECT_EQ(e.reason, "");
  EXPECT_EQ(e.code(), StatusCode::kUnavailable);
  EXPECT_EQ(e.toStatus("get pods demo/a").message(),
            "get pods demo/a: HTTP 503: upstream connect error");
  EXPECT_EQ(parseApiError(410, "").code(), StatusCode::kGone);
  EXPECT_EQ(parseApiError(429, "").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(parseApiError(404, "<html>").code(), StatusCode::kNotFound);
}

TEST(ApiErrorTest, KeepsFieldCausesOfInvalidThatTheMessageDoesNotRepeat) {
  const std::string body = R"({"kind":"Status","reason":"Invalid","code":422,
    "message":"ShardMap.kshard.io \"c\" is invalid: spec.shards: Invalid value: 0: must be >= 1",
    "details":{"causes":[
      {"reason":"FieldValueInvalid","message":"Invalid value: 0: must be >= 1","field":"spec.shards"},
      {"reason":"FieldValueRequired","message":"Required value","field":"spec.versionLabel"}]}})";
  ApiError e = parseApiError(422, body);
  ASSERT_EQ(e.causes.size(), 2u);
  EXPECT_EQ(e.causes[1].field, "spec.versionLabel");
  Status s = e.toStatus("create shardmaps.kshard.io demo/c");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("spec.shards: Invalid value: 0: must be >= 1"), std::string::npos);
  EXPECT_NE(s.message().find("; spec.versionLabel: Required value"), std::string::npos);
  // The cause the message already states is not repeated.
  EXPECT_EQ(s.message().find("; spec.shards"), std::string::npos);
}

TEST(ApiErrorTest, ReadsRetryAfterSecondsFromDetails) {
  ApiError e = parseApiError(429, R"({"kind":"Status","reason":"TooManyRequests","code":429,
      "message":"too many requests","details":{"retryAfterSeconds":3}})");
  ASSERT_TRUE(e.retryAfter.has_value());
  EXPECT_EQ(*e.retryAfter, std::chrono::seconds(3));
}

TEST(ApiErrorTest, WatchErrorObjectWith410IsGone) {
  const auto status = nlohmann::json::parse(
      R"json({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410})json");
  ApiError e = apiErrorFromStatus(status);
  EXPECT_EQ(e.httpStatus, 410);
  EXPECT_EQ(e.code(), StatusCode::kGone);
}

}  // namespace
}  // namespace kshard::kube
