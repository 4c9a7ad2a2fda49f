// kube::Client and kube::Informer over real HTTP: an in-process stub API server (http::Server on
// 127.0.0.1) answers with the error paths a real API server produces, and the client runs on each
// http::Client adapter. Time that the client waits (Retry-After, backoff) is simulated.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "http/factory.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/seen_events.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::kWaitLimit;

std::string statusBody(int code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", message}}
      .dump();
}

json pod(const std::string& name, const std::string& rv) {
  return {{"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "demo"}, {"resourceVersion", rv}}}};
}

std::string line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

// Waits (real time) until `pred` holds; fails the test with `what` otherwise.
template <typename Pred>
bool eventually(Pred pred, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "timed out waiting for: " << what;
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// The stub: routes for pods and configmaps whose behaviour each test scripts.
class ApiStub {
 public:
  using Script = std::function<void(const http::Request&, http::Responder&)>;

  explicit ApiStub(http::Backend backend) {
    http::ServerOptions o;
    o.host = "127.0.0.1";
    server_ = http::makeServer(backend, o);
    for (const char* pattern :
         {"/api/v1/namespaces/{ns}/pods", "/api/v1/namespaces/{ns}/pods/{name}",
          "/api/v1/namespaces/{ns}/configmaps", "/api/v1/namespaces/{ns}/configmaps/{name}"}) {
      for (auto method : {http::Method::kGet, http::Method::kPost, http::Method::kPut}) {
        server_->route(method, pattern, [this](http::Request r, http::Responder responder) {
          Script script;
          {
            std::lock_guard lock(mu_);
            requests_.push_back(r);
            script = script_;
          }
          cv_.notify_all();
          if (script) script(r, responder);
          if (!responder.sent()) responder.send(http::Response::json(500, "{}"));
        });
      }
    }
  }
  ~ApiStub() { server_->stop(); }

  Status start() { return server_->start(); }
  void stop() { server_->stop(); }
  std::string baseUrl() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  void script(Script s) {
    std::lock_guard lock(mu_);
    script_ = std::move(s);
  }
  std::vector<http::Request> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::size_t requestCount() {
    std::lock_guard lock(mu_);
    return requests_.size();
  }

 private:
  std::unique_ptr<http::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  Script script_;
  std::vector<http::Request> requests_;
};

class ApiStubTest : public ::testing::TestWithParam<http::Backend> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(stub_.start().ok());
    http::ClientOptions o;
    o.baseUrl = stub_.baseUrl();
    o.requestTimeout = seconds(10);
    auto t = http::makeClient(GetParam(), o);
    ASSERT_TRUE(t.ok()) << t.status().toString();
    transport_ = std::move(*t);
  }
  // Everything that can send stops before the stub does, and the stub before the fixture's
  // members that its handlers use are destroyed.
  void TearDown() override {
    informer_.reset();
    client_.reset();
    transport_.reset();
    stub_.stop();
  }
  Client& client(std::shared_ptr<TokenSource> token = nullptr) {
    ClientOptions o;
    o.qps = 0;
    o.userAgent = "kshard-test/1";
    o.retryBackoff = {milliseconds(100), seconds(1), 2.0, 0.0};
    client_ =
        std::make_unique<Client>(*transport_, scheduler_, random_, logger_, o, std::move(token));
    return *client_;
  }

  ApiStub stub_{http::Backend::kBeast};
  ManualScheduler scheduler_;
  SeededRandom random_{9};
  Logger logger_{"kube-test", LogLevel::kError, [](std::string_view) {}};
  std::unique_ptr<http::Client> transport_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Informer> informer_;
};

TEST_P(ApiStubTest, UpdateConflictIsTypedAndKeepsTheServersMessage) {
  stub_.script([](const http::Request&, http::Responder& r) {
    r.send(http::Response::json(
        409,
        statusBody(409, "Conflict",
                   "Operation cannot be fulfilled on configmaps \"x\": the object has been "
                   "modified; please apply your changes to the latest version and try again")));
  });
  auto updated = client().update(resources::kConfigMaps, "demo",
                                 {{"metadata", {{"name", "x"}, {"resourceVersion", "5"}}}});
  ASSERT_FALSE(updated.ok());
  EXPECT_EQ(updated.status().code(), StatusCode::kConflict);
  EXPECT_NE(updated.status().message().find("the object has been modified"), std::string::npos);
  ASSERT_EQ(stub_.requestCount(), 1u);
  const auto req = stub_.requests()[0];
  EXPECT_EQ(req.method, http::Method::kPut);
  EXPECT_EQ(json::parse(req.body)["metadata"]["resourceVersion"], "5");
  EXPECT_EQ(req.headers.get("User-Agent"), "kshard-test/1");
}

TEST_P(ApiStubTest, TooManyRequestsIsRetriedAfterRetryAfter) {
  std::atomic<int> calls{0};
  stub_.script([&](const http::Request&, http::Responder& r) {
    if (calls++ == 0) {
      auto resp = http::Response::json(429, statusBody(429, "TooManyRequests", "slow down"));
      resp.headers.set("Retry-After", "2");
      r.send(std::move(resp));
      return;
    }
    r.send(http::Response::json(200, pod("a", "3").dump()));
  });
  std::mutex mu;
  std::optional<StatusOr<json>> result;
  client().callAsync(getRequest(resources::kPods, "demo", "a"), [&](StatusOr<json> r) {
    std::lock_guard lock(mu);
    result.emplace(std::move(r));
  });
  ASSERT_TRUE(eventually([&] { return scheduler_.pending() > 0; }, "the retry to be scheduled"));
  scheduler_.advance(milliseconds(1999));
  EXPECT_EQ(stub_.requestCount(), 1u) << "retried before Retry-After";
  scheduler_.advance(milliseconds(1));
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard lock(mu);
        return result.has_value();
      },
      "the retried GET to complete"));
  std::lock_guard lock(mu);
  ASSERT_TRUE(result->ok()) << result->status().toString();
  EXPECT_EQ((**result)["metadata"]["resourceVersion"], "3");
  EXPECT_EQ(stub_.requestCount(), 2u);
}

TEST_P(ApiStubTest, ListAllPagesThroughContinueTokens) {
  stub_.script([](const http::Request& req, http::Responder& r) {
    const std::string cont(req.queryParam("continue").value_or(""));
    const int page = cont.empty() ? 0 : std::stoi(cont);
    json items = json::array(
        {pod("p" + std::to_string(2 * page), "9"), pod("p" + std::to_string(2 * page + 1), "9")});
    json meta = {{"resourceVersion", "42"}};
    if (page < 2) meta["continue"] = std::to_string(page + 1);
    r.send(http::Response::json(200, json{{"metadata", meta}, {"items", items}}.dump()));
  });
  ListOptions o;
  o.limit = 2;
  o.labelSelector = "app=counter";
  auto all = client().listAll(resources::kPods, "demo", o);
  ASSERT_TRUE(all.ok()) << all.status().toString();
  ASSERT_EQ(all->items.size(), 6u);
  EXPECT_EQ(all->items[5]["metadata"]["name"], "p5");
  EXPECT_EQ(all->resourceVersion, "42");
  auto reqs = stub_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].queryParam("labelSelector"), "app=counter");
  EXPECT_EQ(reqs[2].queryParam("continue"), "2");
  EXPECT_EQ(reqs[2].queryParam("limit"), "2");
}

TEST_P(ApiStubTest, RotatedTokenIsPickedUpAfterA401) {
  char tmpl[] = "/tmp/kshard-kube-token-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/token";
  std::ofstream(path) << "old-token\n";
  ManualClock clock;
  auto token = std::make_shared<FileTokenSource>(path, clock);
  ASSERT_TRUE(token->token().ok());
  // The kubelet rotates the file; the API server stops accepting the old token.
  std::ofstream(path) << "new-token\n";
  stub_.script([](const http::Request& req, http::Responder& r) {
    if (req.headers.get("Authorization") != "Bearer new-token") {
      r.send(http::Response::json(401, statusBody(401, "Unauthorized", "Unauthorized")));
      return;
    }
    r.send(http::Response::json(200, pod("a", "1").dump()));
  });
  auto got = client(token).get(resources::kPods, "demo", "a");
  EXPECT_TRUE(got.ok()) << got.status().toString();
  auto reqs = stub_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].headers.get("Authorization"), "Bearer old-token");
  EXPECT_EQ(reqs[1].headers.get("Authorization"), "Bearer new-token");
  std::filesystem::remove_all(tmpl);
}

// Watch scripting: each watch request takes the next script, which writes to the stream.
class WatchScripts {
 public:
  using Fn = std::function<void(http::StreamWriter&)>;
  void add(Fn fn) {
    std::lock_guard lock(mu_);
    fns_.push_back(std::move(fn));
  }
  void serve(const http::Request& req, http::Responder& r) {
    Fn fn;
    {
      std::lock_guard lock(mu_);
      watches_.push_back(std::string(req.queryParam("resourceVersion").value_or("")));
      if (!fns_.empty()) {
        fn = std::move(fns_.front());
        fns_.pop_front();
      }
    }
    auto writer = r.startStream(200, {});
    ASSERT_TRUE(writer.ok()) << writer.status().toString();
    std::shared_ptr<http::StreamWriter> w = std::move(*writer);
    {
      std::lock_guard lock(mu_);
      open_.push_back(w);
    }
    if (fn) fn(*w);
  }
  std::vector<std::string> versions() {
    std::lock_guard lock(mu_);
    return watches_;
  }
  void finishAll() {
    std::lock_guard lock(mu_);
    for (auto& w : open_) w->finish();
    open_.clear();
  }
  // Cuts the connection of the newest watch (after what it wrote has reached the client).
  void abortNewest() {
    std::lock_guard lock(mu_);
    ASSERT_FALSE(open_.empty());
    open_.back()->abort();
  }

 private:
  std::mutex mu_;
  std::deque<Fn> fns_;
  std::vector<std::string> watches_;
  std::vector<std::shared_ptr<http::StreamWriter>> open_;
};

class InformerStubTest : public ApiStubTest {
 protected:
  void serveLists(std::vector<std::string> lists) {
    lists_ = std::move(lists);
    stub_.script([this](const http::Request& req, http::Responder& r) {
      if (req.queryParam("watch") == "true") {
        watches_.serve(req, r);
        return;
      }
      const std::size_t n = listed_++;
      r.send(http::Response::json(200, lists_[std::min(n, lists_.size() - 1)]));
    });
  }
  void startInformer() {
    InformerOptions o;
    o.resource = resources::kPods;
    o.ns = "demo";
    informer_ = std::make_unique<Informer>(client(), scheduler_, informerRandom_, logger_, o);
    informer_->addHandler(seen_.handler());
    informer_->start();
  }
  void TearDown() override {
    watches_.finishAll();
    ApiStubTest::TearDown();
  }
  // Lets the informer's backoff pass once it is waiting.
  void passBackoff() {
    ASSERT_TRUE(eventually([&] { return scheduler_.pending() > 0; }, "the informer to back off"));
    scheduler_.advance(seconds(60));
  }

  std::vector<std::string> lists_;
  std::atomic<std::size_t> listed_{0};
  WatchScripts watches_;
  testing::SeenEvents seen_;
  SeededRandom informerRandom_{5};
};

std::string podList(const std::string& rv, const std::vector<json>& items) {
  return json{{"kind", "PodList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}}
      .dump();
}

TEST_P(InformerStubTest, GoneInTheMiddleOfAWatchRelists) {
  serveLists({podList("10", {pod("a", "1"), pod("b", "2")}),
              podList("30", {pod("a", "11"), pod("c", "25")})});
  watches_.add([](http::StreamWriter& w) {
    w.write(line("MODIFIED", pod("a", "11")));
    w.write(line("ERROR",
                 json::parse(statusBody(410, "Expired", "too old resource version: 11 (20)"))));
    w.finish();
  });
  startInformer();
  ASSERT_TRUE(informer_->waitForSync(kWaitLimit));
  ASSERT_TRUE(eventually([&] { return seen_.all().size() >= 3; }, "the MODIFIED event"));
  // No backoff: the version only aged out, and the relist comes at once.
  ASSERT_TRUE(eventually([&] { return seen_.all().size() >= 5; }, "the relist's differences"));
  EXPECT_EQ(seen_.all(),
            (std::vector<std::string>{"add a@1 initial", "add b@2 initial", "update a 1->11",
                                      "add c@25", "delete b@2 unknown"}));
  ASSERT_TRUE(eventually([&] { return watches_.versions().size() >= 2; }, "the second watch"));
  EXPECT_EQ(watches_.versions(), (std::vector<std::string>{"10", "30"}));
  EXPECT_EQ(listed_.load(), 2u);
}

TEST_P(InformerStubTest, StreamCutInTheMiddleOfAJsonLineResumesWithoutLossOrRepeat) {
  serveLists({podList("10", {pod("a", "1")})});
  const std::string modified = line("MODIFIED", pod("a", "12"));
  watches_.add([&](http::StreamWriter& w) {
    w.write(line("ADDED", pod("b", "11")) + modified.substr(0, 25));
  });
  watches_.add([&](http::StreamWriter& w) { w.write(modified); });
  startInformer();
  ASSERT_TRUE(eventually([&] { return seen_.all().size() >= 2; }, "the ADDED event"));
  // The half line has been sent with the event; now the server dies mid-line.
  watches_.abortNewest();
  passBackoff();
  ASSERT_TRUE(eventually([&] { return seen_.all().size() >= 3; }, "the resent MODIFIED event"));
  EXPECT_EQ(seen_.all(),
            (std::vector<std::string>{"add a@1 initial", "add b@11", "update a 1->12"}));
  EXPECT_EQ(watches_.versions(), (std::vector<std::string>{"10", "11"}));
  EXPECT_EQ(listed_.load(), 1u) << "a cut stream resumes the watch, it does not relist";
}

std::string backendName(const ::testing::TestParamInfo<http::Backend>& info) {
  return std::string(http::backendName(info.param));
}

INSTANTIATE_TEST_SUITE_P(Adapters, ApiStubTest,
                         ::testing::Values(http::Backend::kCppRest, http::Backend::kBeast),
                         backendName);
INSTANTIATE_TEST_SUITE_P(Adapters, InformerStubTest,
                         ::testing::Values(http::Backend::kCppRest, http::Backend::kBeast),
                         backendName);

}  // namespace
}  // namespace kshard::kube
