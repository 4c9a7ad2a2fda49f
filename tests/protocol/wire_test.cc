#include "protocol/wire.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kshard::protocol {
namespace {

TEST(WireTest, RegisterRoundTrips) {
  RegisterRequest r{"counter-5d9-abc", "8f1c", "10.1.0.12:7101", "2.0.0", "3f9a0c"};
  auto back = decodeRegisterRequest(encode(r));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->pod, r.pod);
  EXPECT_EQ(back->uid, r.uid);
  EXPECT_EQ(back->address, r.address);
  EXPECT_EQ(back->version, r.version);
  EXPECT_EQ(back->incarnation, r.incarnation);
  // A sidecar of a version before incarnations sends none.
  EXPECT_TRUE(decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"h:1"})").ok());
  EXPECT_FALSE(
      decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"h:1","incarnation":"a b"})").ok());
}

TEST(WireTest, RegisterErrorsNameTheField) {
  EXPECT_EQ(decodeRegisterRequest("{").status().message(), "body is not valid JSON");
  EXPECT_EQ(decodeRegisterRequest("[]").status().message(), "body must be a JSON object");
  EXPECT_EQ(decodeRegisterRequest(R"({"uid":"u","address":"a:1"})").status().message(),
            "pod: required");
  EXPECT_EQ(decodeRegisterRequest(R"({"pod":7,"uid":"u","address":"a:1"})").status().message(),
            "pod: must be a string");
  EXPECT_EQ(decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"nohost"})").status().message(),
            "address: must be host:port");
  EXPECT_EQ(
      decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"h:70000"})").status().message(),
      "address: port must be 1..65535 (decimal, no leading zero)");
  for (const char* port : {"0", "07101", "+80", "65536"}) {
    EXPECT_FALSE(
        decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"h:)" + std::string(port) + R"("})")
            .ok())
        << port << ": one address has one spelling (the manager API's schema says so too)";
  }
  EXPECT_TRUE(decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"h:65535"})").ok());
  const std::string target = R"("pod":"p","uid":"u","incarnation":"i",)";
  EXPECT_EQ(decodeShardsRequest(
                R"({"shardMap":"demo/counter",)" + target + R"("epoch":1,"shards":null})", 64)
                .status()
                .message(),
            "shards: required");
  EXPECT_TRUE(
      decodeShardsRequest(R"({"shardMap":"demo/counter",)" + target + R"("epoch":1,"shards":""})",
                          64)
          .ok())
      << "an empty range text is an empty set";
  EXPECT_EQ(decodeRegisterRequest("{\"pod\":\"p\\u0000\xff\",\"uid\":\"u\",\"address\":\"h:1\"}")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(decodeRegisterRequest(R"({"pod":"p","uid":"u","address":"h:1","extra":1})").ok())
      << "unknown fields must be ignored for forward compatibility";
}

TEST(WireTest, UnregisterDeferredRoundTripsAndIsAnErrorBody) {
  UnregisterDeferred d{"wait for 2.0.0", 1000, 42'000, "2.0.0", 3};
  const std::string body = encode(d);
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["error"]["code"], "UnregisterDeferred");
  EXPECT_EQ(j["error"]["message"], "wait for 2.0.0");
  auto back = decodeUnregisterDeferred(body);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->message, d.message);
  EXPECT_EQ(back->retryAfterMs, 1000);
  EXPECT_EQ(back->deferredForMs, 42'000);
  EXPECT_EQ(back->version, "2.0.0");
  EXPECT_EQ(back->startingPods, 3);
}

TEST(WireTest, OnlyAnUnregisterDeferredBodyDecodesAsOne) {
  EXPECT_FALSE(decodeUnregisterDeferred(R"({"error":{"code":"Conflict","message":"x"}})").ok());
  EXPECT_FALSE(decodeUnregisterDeferred(R"({"retryAfterMs":1000})").ok());
  EXPECT_FALSE(decodeUnregisterDeferred("not json").ok());
  const auto negative = decodeUnregisterDeferred(
      R"({"error":{"code":"UnregisterDeferred","message":""},"retryAfterMs":-1})");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("retryAfterMs"), std::string::npos);
  EXPECT_FALSE(decodeUnregisterDeferred(
                   R"({"error":{"code":"UnregisterDeferred","message":""},"waitingFor":[]})")
                   .ok());
  // The counts are optional: a bare deferral asks again at the client's own pace.
  EXPECT_TRUE(
      decodeUnregisterDeferred(R"({"error":{"code":"UnregisterDeferred","message":""}})").ok());
}

TEST(WireTest, ShardsRequestRoundTripsAndValidatesRanges) {
  ShardsRequest r{"demo/counter", {"counter-0", "u-1", "ab12"}, 57,
                  sharding::ShardSet::of({1, 2, 3, 10})};
  const std::string body = encode(r);
  EXPECT_EQ(body,
            R"({"epoch":57,"incarnation":"ab12","pod":"counter-0","shardMap":"demo/counter",)"
            R"("shards":"1-3,10","uid":"u-1"})");
  auto back = decodeShardsRequest(body, 300);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->epoch, 57u);
  EXPECT_EQ(back->shards, r.shards);
  EXPECT_EQ(back->target, r.target);

  auto outOfRange = decodeShardsRequest(body, 5);
  ASSERT_FALSE(outOfRange.ok());
  EXPECT_EQ(outOfRange.status().message().rfind("shards: ", 0), 0u)
      << outOfRange.status().message();
  const std::string target = R"("pod":"p","uid":"u","incarnation":"i",)";
  EXPECT_EQ(decodeShardsRequest(
                R"({"shardMap":"demo/counter",)" + target + R"("epoch":-1,"shards":""})", 5)
                .status()
                .message(),
            "epoch: must be a non-negative integer");
  EXPECT_FALSE(
      decodeShardsRequest(R"({"shardMap":"Demo",)" + target + R"("epoch":1,"shards":""})", 5).ok());
}

TEST(WireTest, CommandsMustNameTheirTarget) {
  // Without a target a command could reach whichever sidecar has the address now.
  EXPECT_EQ(decodeShardsRequest(R"({"shardMap":"demo/counter","epoch":1,"shards":""})", 5)
                .status()
                .message(),
            "pod: required");
  EXPECT_EQ(decodeShardsRequest(R"({"shardMap":"demo/counter","pod":"p","uid":"u","epoch":1,)"
                                R"("shards":""})",
                                5)
                .status()
                .message(),
            "incarnation: required");
  EXPECT_FALSE(decodeShardsRequest(R"({"shardMap":"demo/counter","pod":"P!","uid":"u",)"
                                   R"("incarnation":"i","epoch":1,"shards":""})",
                                   5)
                   .ok());
  const Target t{"counter-1", "0f9e-77", "c0ffee"};
  auto back = targetFromQuery("counter-1", "0f9e-77", "c0ffee");
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(*back, t);
  EXPECT_EQ(pingQuery(t), "pod=counter-1&uid=0f9e-77&incarnation=c0ffee");
  EXPECT_EQ(targetFromQuery("counter-1", std::nullopt, "c").status().message(),
            "query: uid: required");
  auto renew = decodeTarget(encode(t));
  ASSERT_TRUE(renew.ok());
  EXPECT_EQ(*renew, t);
}

TEST(WireTest, ShardMapRefsAreValidatedNames) {
  auto ref = parseShardMapRef("demo/counter.v2");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->ns, "demo");
  EXPECT_EQ(ref->name, "counter.v2");
  EXPECT_FALSE(parseShardMapRef("demo").ok());
  EXPECT_FALSE(parseShardMapRef("/x").ok());
  EXPECT_FALSE(parseShardMapRef("demo/").ok());
  EXPECT_FALSE(parseShardMapRef("de mo/x").ok());
  EXPECT_FALSE(parseShardMapRef("demo/-x").ok());
  EXPECT_FALSE(parseShardMapRef("a.b/x").ok()) << "namespaces are labels, without dots";
}

TEST(WireTest, PingAndEpochRoundTrip) {
  PingResponse p{"p1", "u1", "inc", 9, "1-4", {}};
  p.load = {{2, 0.25}, {4, 1.5}};
  auto back = decodePingResponse(encode(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shards, "1-4");
  EXPECT_EQ(back->epoch, 9u);
  EXPECT_EQ(back->incarnation, "inc");
  EXPECT_EQ(back->load, p.load);
  // A sidecar that predates load reports: no field, no load.
  auto old = decodePingResponse(R"({"pod":"p1","uid":"u1","incarnation":"i","epoch":1,"shards":""})");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->load.has_value());
  EXPECT_EQ(encode(*old).find("load"), std::string::npos);
  // A figure beyond any app's is taken as the largest, so that sums of them stay finite.
  auto huge = decodePingResponse(
      R"({"pod":"p1","uid":"u1","incarnation":"i","epoch":1,"shards":"1","load":[[1,1e300]]})");
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ((*huge->load)[0].second, kMaxShardLoad);
  for (const char* bad : {R"("x")", "[[0, 1]]", "[[1, -1]]", "[[1]]", R"([[1, "a"]])", "[[1.5, 1]]"}) {
    const std::string body =
        std::string(R"({"pod":"p1","uid":"u1","incarnation":"i","epoch":1,"shards":"","load":)") +
        bad + "}";
    EXPECT_FALSE(decodePingResponse(body).ok()) << bad;
  }
  auto e = decodeEpochResponse(encode(EpochResponse{42, std::nullopt}));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->epoch, 42u);
  EXPECT_FALSE(e->terminating.has_value());
  auto t = decodeEpochResponse(encode(EpochResponse{43, false}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->terminating, false);
  EXPECT_FALSE(decodeEpochResponse(R"({"epoch":1,"terminating":"no"})").ok());
  auto a = decodeAssignResponse(encode(AssignResponse{sharding::ShardSet::of({4})}), 10);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->refused.toString(), "4");
}

}  // namespace
}  // namespace kshard::protocol
