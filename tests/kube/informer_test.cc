#include "kube/informer.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "tests/kube/fake_transport.h"
#include "tests/kube/seen_events.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeTransport;
using testing::jsonResponse;
using testing::kWaitLimit;

json pod(const std::string& name, const std::string& rv) {
  return {{"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "demo"}, {"resourceVersion", rv}}}};
}

std::string list(const std::string& rv, const std::vector<json>& items) {
  return json{{"kind", "PodList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}}
      .dump();
}

std::string event(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class InformerTest : public ::testing::Test {
 protected:
  InformerTest() {
    transport_.setHandler(
        [this](const http::Request& r) -> std::optional<StatusOr<http::Response>> {
          std::lock_guard lock(mu_);
          lists_.push_back(r.target);
          if (listAnswers_.empty()) return std::nullopt;
          auto a = listAnswers_.front();
          listAnswers_.pop_front();
          return a;
        });
  }
  ~InformerTest() override {
    if (informer_) informer_->stop();
  }

  void answerListWith(StatusOr<http::Response> r) {
    std::lock_guard lock(mu_);
    listAnswers_.push_back(std::move(r));
  }

  void start(InformerOptions o = {}) {
    if (o.resource.resource.empty()) o.resource = resources::kPods;
    if (o.ns.empty()) o.ns = "demo";
    informer_ = std::make_unique<Informer>(client_, scheduler_, random_, logger_, o);
    informer_->addHandler(seen_.handler());
    informer_->start();
  }

  // Waits until the informer is waiting out a backoff, then lets it pass.
  void passBackoff() {
    const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
    while (scheduler_.pending() == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the informer never backed off";
      std::this_thread::yield();
    }
    scheduler_.advance(seconds(60));
  }

  FakeTransport transport_;
  ManualScheduler scheduler_;
  SeededRandom random_{3};
  Logger logger_{"kube-test", LogLevel::kError, [](std::string_view) {}};
  Client client_{transport_, scheduler_, random_, logger_, ClientOptions{.qps = 0}};
  SeededRandom informerRandom_{4};
  testing::SeenEvents seen_;
  std::unique_ptr<Informer> informer_;
  std::mutex mu_;
  std::deque<StatusOr<http::Response>> listAnswers_;
  std::vector<std::string> lists_;
};

TEST_F(InformerTest, ListsThenWatchesFromTheListVersionAndAppliesEvents) {
  answerListWith(jsonResponse(200, list("10", {pod("a", "1"), pod("b", "2")})));
  InformerOptions o;
  o.labelSelector = "kshard.io/shard-map";
  start(o);
  auto watch = transport_.nextStream();
  ASSERT_TRUE(watch.stream);
  EXPECT_TRUE(contains(watch.request.target,
                       "watch=true&labelSelector=kshard.io%2Fshard-map&resourceVersion=10&"
                       "allowWatchBookmarks=true&timeoutSeconds="))
      << watch.request.target;
  ASSERT_TRUE(informer_->waitForSync(kWaitLimit));
  EXPECT_EQ(seen_.waitFor(2), (std::vector<std::string>{"add a@1 initial", "add b@2 initial"}));

  watch.stream->write(event("MODIFIED", pod("a", "11")) + event("DELETED", pod("b", "12")) +
                      event("ADDED", pod("c", "13")));
  EXPECT_EQ(seen_.waitFor(5),
            (std::vector<std::string>{"add a@1 initial", "add b@2 initial", "update a 1->11",
                                      "delete b@12", "add c@13"}));
  EXPECT_EQ(informer_->store().keys(), (std::vector<std::string>{"demo/a", "demo/c"}));
  EXPECT_EQ(resourceVersionOf(*informer_->store().get("demo", "a")), "11");
  EXPECT_EQ(lists_[0],
            "/api/v1/namespaces/demo/pods?labelSelector=kshard.io%2Fshard-map&limit=500");
}

TEST_F(InformerTest, TransformAppliesToListedAndWatchedObjectsBeforeTheyAreCached) {
  auto withManagedFields = [](json object) {
    object["metadata"]["managedFields"] = json::array({{{"manager", "kubectl"}}});
    return object;
  };
  answerListWith(jsonResponse(200, list("10", {withManagedFields(pod("a", "1"))})));
  InformerOptions o;
  o.transform = stripManagedFields;
  start(o);
  auto watch = transport_.nextStream();
  ASSERT_TRUE(watch.stream);
  watch.stream->write(event("ADDED", withManagedFields(pod("b", "11"))));
  EXPECT_EQ(seen_.waitFor(2), (std::vector<std::string>{"add a@1 initial", "add b@11"}));
  for (const char* name : {"a", "b"}) {
    ObjectPtr cached = informer_->store().get("demo", name);
    ASSERT_TRUE(cached) << name;
    EXPECT_FALSE(cached->at("metadata").contains("managedFields")) << cached->dump();
    EXPECT_EQ(cached->at("metadata").at("name"), name);
  }
}

TEST(StripManagedFields, LeavesObjectsWithoutMetadataAlone) {
  json noMetadata = {{"kind", "Pod"}};
  stripManagedFields(noMetadata);
  EXPECT_EQ(noMetadata, (json{{"kind", "Pod"}}));
  json oddMetadata = {{"metadata", "text"}};
  stripManagedFields(oddMetadata);
  EXPECT_EQ(oddMetadata, (json{{"metadata", "text"}}));
}

TEST_F(InformerTest, StreamCutInsideAnEventResumesFromTheLastVersionWithoutLossOrRepeats) {
  answerListWith(jsonResponse(200, list("10", {pod("a", "1")})));
  start();
  auto first = transport_.nextStream();
  seen_.waitFor(1);
  const std::string modified = event("MODIFIED", pod("a", "12"));
  first.stream->write(event("ADDED", pod("c", "11")) + modified.substr(0, modified.size() / 2));
  first.stream->fail(unavailable("connection reset by peer"));
  seen_.waitFor(2);
  passBackoff();

  auto second = transport_.nextStream();
  ASSERT_TRUE(second.stream);
  EXPECT_TRUE(contains(second.request.target, "resourceVersion=11&")) << second.request.target;
  // A server may repeat what we already have; it must not be reported twice.
  second.stream->write(event("ADDED", pod("c", "11")) + modified);
  second.stream->write(
      event("BOOKMARK", {{"kind", "Pod"}, {"metadata", {{"resourceVersion", "15"}}}}));
  EXPECT_EQ(seen_.waitFor(3),
            (std::vector<std::string>{"add a@1 initial", "add c@11", "update a 1->12"}));
  EXPECT_EQ(lists_.size(), 1u) << "a dropped stream must resume, not relist";

  // A clean end (the server's timeoutSeconds) re-watches at once from the bookmark.
  second.stream->end();
  auto third = transport_.nextStream();
  EXPECT_TRUE(contains(third.request.target, "resourceVersion=15&")) << third.request.target;
  EXPECT_EQ(seen_.all().size(), 3u);
}

TEST_F(InformerTest, GoneMidWatchRelistsAndReconcilesTheCache) {
  answerListWith(jsonResponse(200, list("10", {pod("a", "1"), pod("b", "2"), pod("c", "3")})));
  start();
  auto first = transport_.nextStream();
  seen_.waitFor(3);
  // The relist, at once (no backoff: the version only aged out): a unchanged, b changed, c gone,
  // d new.
  answerListWith(jsonResponse(200, list("950", {pod("a", "1"), pod("b", "7"), pod("d", "8")})));
  first.stream->write(event("ERROR", {{"kind", "Status"},
                                      {"code", 410},
                                      {"reason", "Expired"},
                                      {"message", "too old resource version: 10 (900)"}}));
  auto second = transport_.nextStream();
  EXPECT_TRUE(contains(second.request.target, "resourceVersion=950&")) << second.request.target;
  auto seen = seen_.waitFor(6);
  EXPECT_EQ(std::vector<std::string>(seen.begin() + 3, seen.end()),
            (std::vector<std::string>{"update b 2->7", "add d@8", "delete c@3 unknown"}));
  EXPECT_EQ(lists_.size(), 2u);
  EXPECT_EQ(informer_->stats().lists, 2u);
  EXPECT_EQ(informer_->stats().failures, 0u);

  // Expired again within 10 s: a server that misbehaves gets the backoff.
  answerListWith(jsonResponse(200, list("960", {pod("a", "1")})));
  second.stream->write(event("ERROR", {{"kind", "Status"}, {"code", 410}, {"reason", "Expired"}}));
  passBackoff();
  auto third = transport_.nextStream();
  EXPECT_TRUE(contains(third.request.target, "resourceVersion=960&")) << third.request.target;
  EXPECT_EQ(informer_->stats().failures, 1u);
}

TEST_F(InformerTest, WatchRefusedWithGoneRelists) {
  answerListWith(jsonResponse(200, list("10", {pod("a", "1")})));
  int opened = 0;
  transport_.setStreamHandler([&](const http::Request&) {
    if (++opened == 1) {
      return std::pair<int, std::string>{
          410, R"({"kind":"Status","code":410,"reason":"Expired","message":"too old"})"};
    }
    return std::pair<int, std::string>{200, ""};
  });
  start();
  transport_.nextStream();  // the refused one
  answerListWith(jsonResponse(200, list("20", {pod("a", "2")})));
  passBackoff();
  auto second = transport_.nextStream();
  EXPECT_TRUE(contains(second.request.target, "resourceVersion=20&")) << second.request.target;
  EXPECT_EQ(seen_.waitFor(2), (std::vector<std::string>{"add a@1 initial", "update a 1->2"}));
}

TEST_F(InformerTest, FailedListIsRetriedAndSyncsOnlyAfterSuccess) {
  answerListWith(unavailable("connection refused"));
  start();
  ASSERT_TRUE(transport_.waitForRequests(1));
  EXPECT_FALSE(informer_->waitForSync(milliseconds(20)));
  answerListWith(jsonResponse(200, list("5", {pod("a", "4")})));
  passBackoff();
  ASSERT_TRUE(informer_->waitForSync(kWaitLimit));
  EXPECT_EQ(seen_.waitFor(1), (std::vector<std::string>{"add a@4 initial"}));
  EXPECT_EQ(lists_.size(), 2u);
}

TEST_F(InformerTest, ResyncRedeliversEveryCachedObject) {
  answerListWith(jsonResponse(200, list("10", {pod("a", "1"), pod("b", "2")})));
  InformerOptions o;
  o.resyncPeriod = seconds(30);
  start(o);
  transport_.nextStream();
  ASSERT_TRUE(informer_->waitForSync(kWaitLimit));
  seen_.waitFor(2);
  scheduler_.advance(seconds(30));
  EXPECT_EQ(seen_.waitFor(4), (std::vector<std::string>{"add a@1 initial", "add b@2 initial",
                                                        "update a 1->1", "update b 2->2"}));
}

TEST_F(InformerTest, StopCancelsTheWatchAndReturns) {
  answerListWith(jsonResponse(200, list("10", {})));
  start();
  auto watch = transport_.nextStream();
  informer_->stop();
  EXPECT_TRUE(watch.stream->cancelled());
  watch.stream->write(event("ADDED", pod("late", "11")));
  EXPECT_EQ(informer_->store().size(), 0u);
}

}  // namespace
}  // namespace kshard::kube
