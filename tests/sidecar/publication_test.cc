// Publication: topic names are checked before they reach a path or a header, and a publisher
// reads every shape of a peer's answer.
#include "sidecar/publication.h"

#include <gtest/gtest.h>

#include "protocol/wire.h"

namespace kshard::sidecar {
namespace {

TEST(PublicationTest, ATopicIsCheckedLikeAnEntityTypeAndMayNotBreakAPathOrAHeader) {
  EXPECT_TRUE(validateTopic("news").ok());
  EXPECT_TRUE(validateTopic("news/sport ünd more").ok());
  EXPECT_TRUE(validateTopic(std::string(253, 't')).ok());
  for (const auto& [topic, problem] : std::vector<std::pair<std::string, std::string>>{
           {"", "must not be empty"},
           {std::string(254, 't'), "longer than 253 bytes"},
           {"\xff\xfe", "topic"},
           {"a\r\nKshard-Owner: p9", "control character"},
           {std::string("a\0b", 3), "control character"},
           {"tab\there", "control character"},
           {".", "must not be . or .."},
           {"..", "must not be . or .."}}) {
    const Status s = validateTopic(topic);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << topic;
    EXPECT_NE(s.message().find(problem), std::string::npos) << topic << ": " << s.message();
  }
}

TEST(PublicationTest, APathHoldsTheTopicAsOneSegmentAndTheTypeAsItsQuery) {
  Publication p;
  p.topic = "../reset?x=1#y";
  EXPECT_EQ(topicPath("/v1/peer/topics/", p), "/v1/peer/topics/..%2Freset%3Fx%3D1%23y");
  p.topic = "news";
  p.entityType = "counter&entities=other";
  EXPECT_EQ(topicPath("/v1/peer/topics/", p),
            "/v1/peer/topics/news?entities=counter%26entities%3Dother");
}

TEST(PublicationTest, AReceiptTravelsAsThePeersAnswer) {
  PodReceipt accepted;
  accepted.accepted = true;
  accepted.entities = 7;
  accepted.entitiesRefused = 2;
  const http::Response ok = receiptAnswer(accepted, "p2");
  EXPECT_EQ(ok.status, 200);
  const PodReceipt back = receiptOfAnswer(ok);
  EXPECT_TRUE(back.accepted);
  EXPECT_EQ(back.entities, 7u);
  EXPECT_EQ(back.entitiesRefused, 2u);

  for (const auto& [code, status] :
       std::vector<std::pair<std::string_view, int>>{{protocol::errors::kDraining, 503},
                                                     {protocol::errors::kLeaseFenced, 503},
                                                     {protocol::errors::kAppRefused, 502},
                                                     {protocol::errors::kOutcomeUnknown, 502}}) {
    const http::Response refused = receiptAnswer(PodReceipt::refused(code, "why"), "p2");
    EXPECT_EQ(refused.status, status) << code;
    EXPECT_EQ(refused.headers.get(protocol::kErrorHeader), code);
    const PodReceipt r = receiptOfAnswer(refused);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(r.code, code);
    EXPECT_NE(r.message.find("why"), std::string::npos) << r.message;
  }
}

TEST(PublicationTest, AnAnswerOfAnotherShapeIsReadAsWellAsItCanBe) {
  // An older peer's router: the code in the body only.
  http::Response notFound = http::Response::error(404, "NotFound", "no route");
  EXPECT_EQ(receiptOfAnswer(notFound).code, "NotFound");
  // Something that is not a sidecar at all.
  http::Response proxy{502, {}, "<html>bad gateway</html>"};
  EXPECT_EQ(receiptOfAnswer(proxy).code, "HTTP502");
  // An accepting answer with counts that are not counts counts none.
  http::Response odd{200, {}, R"({"entities":-3,"entitiesRefused":"x"})"};
  const PodReceipt r = receiptOfAnswer(odd);
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(r.entities, 0u);
  EXPECT_EQ(r.entitiesRefused, 0u);
}

}  // namespace
}  // namespace kshard::sidecar
