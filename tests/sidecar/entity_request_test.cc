// What travels with a message from hop to hop: the headers passed on to the app, the paths of an
// entity, and how a peer's answer is read.
#include "sidecar/entity_request.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "protocol/wire.h"
#include "sidecar/app_host.h"
#include "sidecar/peer_http_client.h"

namespace kshard::sidecar {
namespace {

std::vector<std::pair<std::string, std::string>> fields(const http::Headers& h) {
  return {h.begin(), h.end()};
}

TEST(PassThroughHeaders, KeepsTheAppsFieldsInOrderAndDropsTransportKshardAndCredentials) {
  http::Headers in;
  in.add("Content-Type", "application/json");
  in.add("connection", "keep-alive");
  in.add("X-Trace", "1");
  in.add("Content-Length", "12");
  in.add("KSHARD-EPOCH", "4");
  in.add("Kshard-Shard", "7");
  in.add("Authorization", "Bearer secret");
  in.add("Transfer-Encoding", "chunked");
  in.add("X-Trace", "2");
  in.add("Kshard", "not a kshard- field");
  const http::Headers out = passThroughHeaders(std::move(in));
  EXPECT_EQ(fields(out),
            (std::vector<std::pair<std::string, std::string>>{{"Content-Type", "application/json"},
                                                              {"X-Trace", "1"},
                                                              {"X-Trace", "2"},
                                                              {"Kshard", "not a kshard- field"}}));
}

TEST(HopByHopHeader, NamesEveryTransportFieldInAnyCaseAndNothingElse) {
  for (std::string name :
       {"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "TE",
        "Trailer", "Content-Length", "Host", "Proxy-Authorization"}) {
    EXPECT_TRUE(isHopByHopHeader(name)) << name;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(isHopByHopHeader(name)) << name;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_TRUE(isHopByHopHeader(name)) << name;
  }
  for (const char* name :
       {"", "T", "TF", "Hos", "Hosts", "Trailers", "Upgrades", "Connectio", "Connections",
        "Keep-Alivf", "Content-Type", "Content-Lengths", "Proxy-Authenticate", "Transfer-Encodinh",
        "Authorization", "X-Host", "Kshard-Shard", "User-Agent"}) {
    EXPECT_FALSE(isHopByHopHeader(name)) << name;
  }
}

TEST(EntityPath, EncodesTypeAndIdAsOneSegmentEach) {
  EXPECT_EQ(entityPath("/kshard/entities/", EntityKey{"counter", "a/b c"}),
            "/kshard/entities/counter/a%2Fb%20c");
  EXPECT_EQ(peerEntityPath(EntityKey{"ty pe", "\xe2\x82\xac"}),
            "/v1/peer/entities/ty%20pe/%E2%82%AC");
}

TEST(EntityKeyOfRequest, TakesTheTypeAndIdCapturesWhateverTheirOrder) {
  http::Request request;
  const std::string id(40, 'x');
  request.params = {{"id", id}, {"other", "o"}, {"type", "counter"}};
  const EntityKey key = takeEntityKey(request);
  EXPECT_EQ(key.type, "counter");
  EXPECT_EQ(key.id, id);
  EXPECT_EQ(request.params[1].second, "o");

  http::Request withoutId;
  withoutId.params = {{"type", "counter"}};
  const EntityKey partial = takeEntityKey(withoutId);
  EXPECT_EQ(partial.type, "counter");
  EXPECT_TRUE(partial.id.empty());
}

TEST(PeerAnswer, AnAnswerLosesItsHopByHopFieldsAndKeepsTheRest) {
  http::Response r;
  r.status = 201;
  r.headers.add("Content-Length", "5");
  r.headers.add("Content-Type", "text/plain");
  r.headers.add("Connection", "close");
  r.headers.add("X-App", "yes");
  r.body = "hello";
  const ForwardResult out = PeerHttpClient::classify(std::move(r));
  ASSERT_EQ(out.outcome, ForwardOutcome::kAnswered);
  EXPECT_EQ(out.response.status, 201);
  EXPECT_EQ(out.response.body, "hello");
  EXPECT_EQ(fields(out.response.headers), (std::vector<std::pair<std::string, std::string>>{
                                              {"Content-Type", "text/plain"}, {"X-App", "yes"}}));
}

TEST(PeerAnswer, ARefusalByTheOwnerIsNotAnAnswer) {
  http::Response r;
  r.status = 409;
  r.headers.add(std::string(protocol::kErrorHeader),
                std::string(protocol::errors::kEntityNotManagedByThisPod));
  EXPECT_EQ(PeerHttpClient::classify(std::move(r)).outcome, ForwardOutcome::kNotManaged);
  // The same status from the app, without kshard's error field, is the app's answer.
  http::Response app;
  app.status = 409;
  EXPECT_EQ(PeerHttpClient::classify(std::move(app)).outcome, ForwardOutcome::kAnswered);
}

}  // namespace
}  // namespace kshard::sidecar
