// kube/ against a real API server: the local cluster of e2e/cluster (run by e2e/kube/run.sh).
// Reads KUBECONFIG and fails every test, saying why, when it is unset. The API server restart
// test needs KSHARD_APISERVER_CTL (e2e/cluster/apiserver.sh), which run.sh sets.
//
// Each run works in a namespace of its own, kshard-kube-test-<random>, deleted at the end; the
// test CRD (kubetests.kube-test.kshard.io) is deleted too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "http/factory.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "tests/kube/seen_events.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

const ResourceRef kKubeTests{"kube-test.kshard.io", "v1", "kubetests", Scope::kNamespaced};

// Waits until `pred` holds, polling; fails with `what` at the deadline.
template <typename Pred>
bool waitUntil(Pred pred, Duration limit, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "timed out after " << std::chrono::duration_cast<seconds>(limit).count()
                    << " s waiting for: " << what;
      return false;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

// One transport and client per user (electors get their own, to partition them).
struct Connection {
  // Fails every request while `cut` is set.
  class Switch final : public http::Client {
   public:
    explicit Switch(std::unique_ptr<http::Client> inner) : inner_(std::move(inner)) {}
    void send(http::Request r, http::ResponseCallback done) override {
      if (cut) {
        done(unavailable("partitioned by the test"));
        return;
      }
      inner_->send(std::move(r), std::move(done));
    }
    StatusOr<std::unique_ptr<http::ResponseStream>> openStream(http::Request r) override {
      if (cut) return unavailable("partitioned by the test");
      return inner_->openStream(std::move(r));
    }
    std::atomic<bool> cut{false};

   private:
    std::unique_ptr<http::Client> inner_;
  };

  Connection(const Config& config, Scheduler& scheduler, std::uint64_t seed) : random(seed) {
    auto t = http::makeClient(http::Backend::kCppRest,
                              httpClientOptions(config, "kshard-kube-integration-test"));
    if (!t.ok()) {
      ADD_FAILURE() << "transport: " << t.status().toString();
      return;
    }
    transport = std::make_unique<Switch>(std::move(*t));
    ClientOptions o;
    o.userAgent = "kshard-kube-integration-test/0.1";
    client = std::make_unique<Client>(*transport, scheduler, random, logger, o, config.token,
                                      config.pathPrefix);
  }

  SeededRandom random;
  Logger logger{"kube-integration", LogLevel::kWarn};
  std::unique_ptr<Switch> transport;
  std::unique_ptr<Client> client;
};

class KubeIntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* kubeconfig = std::getenv("KUBECONFIG");
    if (kubeconfig == nullptr || *kubeconfig == '\0') {
      setupError_ = new std::string(
          "KUBECONFIG is not set. These tests need a cluster: run e2e/kube/run.sh, or `make "
          "cluster-up` and export KUBECONFIG=$PWD/.cluster/kubeconfig");
      return;
    }
    LoadOptions o;
    auto c = loadConfig(o, SystemClock::instance());
    if (!c.ok()) {
      setupError_ = new std::string("cannot load KUBECONFIG=" + std::string(kubeconfig) + ": " +
                                    c.status().toString());
      return;
    }
    config_ = new Config(*c);
    scheduler_ = new ThreadScheduler();
    admin_ = new Connection(*config_, *scheduler_, 1);
    std::random_device rd;
    ns_ = new std::string("kshard-kube-test-" + std::to_string(rd() % 1000000));
    auto created =
        admin_->client->create(resources::kNamespaces, "", {{"metadata", {{"name", *ns_}}}});
    if (!created.ok()) {
      setupError_ =
          new std::string("cannot create the test namespace: " + created.status().toString());
    }
  }

  static void TearDownTestSuite() {
    if (admin_ != nullptr && ns_ != nullptr) {
      (void)admin_->client->remove(resources::kNamespaces, "", *ns_);
      (void)admin_->client->remove(resources::kCustomResourceDefinitions, "",
                                   "kubetests.kube-test.kshard.io");
    }
    delete admin_;
    delete scheduler_;
    delete config_;
    delete ns_;
    delete setupError_;
  }

  void SetUp() override {
    if (setupError_ != nullptr) GTEST_FAIL() << *setupError_;
  }

  Client& api() { return *admin_->client; }
  const std::string& ns() { return *ns_; }

  // Creates the test CRD (namespaced, status subresource, a schema) and waits until it serves.
  void ensureCrd() {
    json crd = {
        {"apiVersion", "apiextensions.k8s.io/v1"},
        {"kind", "CustomResourceDefinition"},
        {"metadata", {{"name", "kubetests.kube-test.kshard.io"}}},
        {"spec",
         {{"group", "kube-test.kshard.io"},
          {"scope", "Namespaced"},
          {"names", {{"plural", "kubetests"}, {"singular", "kubetest"}, {"kind", "KubeTest"}}},
          {"versions",
           json::array({{{"name", "v1"},
                         {"served", true},
                         {"storage", true},
                         {"subresources", {{"status", json::object()}}},
                         {"schema",
                          {{"openAPIV3Schema",
                            {{"type", "object"},
                             {"properties",
                              {{"spec",
                                {{"type", "object"},
                                 {"properties",
                                  {{"shards", {{"type", "integer"}, {"minimum", 1}}},
                                   {"note", {{"type", "string"}}}}}}},
                               {"status",
                                {{"type", "object"},
                                 {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}})}}}};
    auto created = api().create(resources::kCustomResourceDefinitions, "", crd);
    ASSERT_TRUE(created.ok() || created.status().code() == StatusCode::kAlreadyExists)
        << created.status().toString();
    waitUntil(
        [&] {
          auto got =
              api().get(resources::kCustomResourceDefinitions, "", "kubetests.kube-test.kshard.io");
          if (!got.ok()) return false;
          for (const auto& c : (*got)["status"].value("conditions", json::array())) {
            if (c.value("type", "") == "Established" && c.value("status", "") == "True") {
              // Established can precede the first list answering by a moment.
              return api().list(kKubeTests, ns()).ok();
            }
          }
          return false;
        },
        seconds(30), "the test CRD to be established");
  }

  static inline Config* config_ = nullptr;
  static inline ThreadScheduler* scheduler_ = nullptr;
  static inline Connection* admin_ = nullptr;
  static inline std::string* ns_ = nullptr;
  static inline std::string* setupError_ = nullptr;
};

TEST_F(KubeIntegrationTest, CrudOnACustomResourceWithItsStatusSubresource) {
  ensureCrd();
  json obj = {{"apiVersion", "kube-test.kshard.io/v1"},
              {"kind", "KubeTest"},
              {"metadata", {{"name", "counter"}, {"labels", {{"app", "counter"}}}}},
              {"spec", {{"shards", 3}}}};
  auto created = api().create(kKubeTests, ns(), obj);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  EXPECT_EQ((*created)["metadata"]["generation"], 1);

  auto again = api().create(kKubeTests, ns(), obj);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().toString();

  json invalid = obj;
  invalid["metadata"]["name"] = "invalid";
  invalid["spec"]["shards"] = 0;
  auto rejected = api().create(kKubeTests, ns(), invalid);
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rejected.status().message().find("spec.shards"), std::string::npos)
      << rejected.status().message();

  ListOptions selected;
  selected.labelSelector = "app=counter";
  auto listed = api().listAll(kKubeTests, ns(), selected);
  ASSERT_TRUE(listed.ok()) << listed.status().toString();
  ASSERT_EQ(listed->items.size(), 1u);

  // Update of the spec with the version read; a second write with the same, now stale, version
  // loses on resourceVersion.
  json got = *api().get(kKubeTests, ns(), "counter");
  json stale = got;
  got["spec"]["shards"] = 5;
  auto updated = api().update(kKubeTests, ns(), got);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  EXPECT_EQ((*updated)["metadata"]["generation"], 2);
  stale["spec"]["shards"] = 7;
  auto conflict = api().update(kKubeTests, ns(), stale);
  EXPECT_EQ(conflict.status().code(), StatusCode::kConflict) << conflict.status().toString();

  // The status subresource writes only the status, and the main resource ignores status.
  json withStatus = *updated;
  withStatus["status"] = {{"epoch", 57}, {"podCount", 2}};
  withStatus["spec"]["shards"] = 99;
  auto statusWritten = api().updateStatus(kKubeTests, ns(), withStatus);
  ASSERT_TRUE(statusWritten.ok()) << statusWritten.status().toString();
  EXPECT_EQ((*statusWritten)["status"]["epoch"], 57);
  EXPECT_EQ((*statusWritten)["spec"]["shards"], 5);
  json mainWrite = *statusWritten;
  mainWrite["status"]["epoch"] = 1;
  auto afterMain = api().update(kKubeTests, ns(), mainWrite);
  ASSERT_TRUE(afterMain.ok()) << afterMain.status().toString();
  EXPECT_EQ((*afterMain)["status"]["epoch"], 57);

  WriteOptions status;
  status.subresource = "status";
  auto patched = api().patch(kKubeTests, ns(), "counter", PatchType::kMerge,
                             {{"status", {{"epoch", 58}}}}, status);
  ASSERT_TRUE(patched.ok()) << patched.status().toString();
  EXPECT_EQ((*patched)["status"]["epoch"], 58);
  EXPECT_EQ((*patched)["status"]["podCount"], 2);

  auto jsonPatched =
      api().patch(kKubeTests, ns(), "counter", PatchType::kJson,
                  json::array({{{"op", "replace"}, {"path", "/spec/note"}, {"value", "hi"}},
                               {{"op", "test"}, {"path", "/spec/shards"}, {"value", 5}}}));
  ASSERT_TRUE(jsonPatched.ok()) << jsonPatched.status().toString();
  EXPECT_EQ((*jsonPatched)["spec"]["note"], "hi");

  DeleteOptions wrongUid;
  wrongUid.preconditionUid = "not-the-uid";
  EXPECT_EQ(api().remove(kKubeTests, ns(), "counter", wrongUid).status().code(),
            StatusCode::kConflict);
  DeleteOptions rightUid;
  rightUid.preconditionUid = uidOf(*jsonPatched);
  auto removed = api().remove(kKubeTests, ns(), "counter", rightUid);
  EXPECT_TRUE(removed.ok()) << removed.status().toString();
  auto gone = api().get(kKubeTests, ns(), "counter");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound) << gone.status().toString();
}

// What a sidecar's map watch asks for: only the metadata of a custom resource, with every write
// of its status seen as a new resourceVersion.
TEST_F(KubeIntegrationTest, AMetadataOnlyInformerSeesEveryStatusWriteButNoStatus) {
  ensureCrd();
  json obj = {{"apiVersion", "kube-test.kshard.io/v1"},
              {"kind", "KubeTest"},
              {"metadata", {{"name", "meta"}}},
              {"spec", {{"shards", 3}}}};
  auto created = api().create(kKubeTests, ns(), obj);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  std::mutex mu;
  std::vector<json> seen;
  SeededRandom random(12);
  InformerOptions o;
  o.resource = kKubeTests;
  o.ns = ns();
  o.fieldSelector = "metadata.name=meta";
  o.metadataOnly = true;
  Informer informer(api(), *scheduler_, random, Logger("kube-integration", LogLevel::kWarn), o);
  informer.addHandler({.onAdd = [&](const json& x, bool) {
                         std::lock_guard lock(mu);
                         seen.push_back(x);
                       },
                       .onUpdate =
                           [&](const json&, const json& x) {
                             std::lock_guard lock(mu);
                             seen.push_back(x);
                           },
                       .onDelete = [](const json&, bool) {}});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(seconds(30)));
  json withStatus = *created;
  withStatus["status"] = {{"epoch", 7}};
  auto written = api().updateStatus(kKubeTests, ns(), withStatus);
  ASSERT_TRUE(written.ok()) << written.status().toString();
  const std::string rv = (*written)["metadata"]["resourceVersion"];
  ASSERT_TRUE(waitUntil(
      [&] {
        std::lock_guard lock(mu);
        return !seen.empty() && seen.back()["metadata"].value("resourceVersion", "") == rv;
      },
      seconds(10), "the status write's version"));
  std::lock_guard lock(mu);
  for (const json& x : seen) {
    EXPECT_EQ(x.value("kind", ""), "PartialObjectMetadata") << x.dump();
    EXPECT_FALSE(x.contains("spec")) << x.dump();
    EXPECT_FALSE(x.contains("status")) << x.dump();
  }
}

TEST_F(KubeIntegrationTest, ListAllPagesThroughARealServer) {
  for (int i = 0; i < 7; ++i) {
    auto c = api().create(
        resources::kConfigMaps, ns(),
        {{"metadata",
          {{"name", "page-" + std::to_string(i)}, {"labels", {{"kube-test", "paging"}}}}},
         {"data", {{"i", std::to_string(i)}}}});
    ASSERT_TRUE(c.ok()) << c.status().toString();
  }
  ListOptions o;
  o.labelSelector = "kube-test=paging";
  o.limit = 3;
  auto firstPage = api().list(resources::kConfigMaps, ns(), o);
  ASSERT_TRUE(firstPage.ok());
  EXPECT_EQ((*firstPage)["items"].size(), 3u);
  EXPECT_FALSE((*firstPage)["metadata"].value("continue", "").empty());
  auto all = api().listAll(resources::kConfigMaps, ns(), o);
  ASSERT_TRUE(all.ok()) << all.status().toString();
  EXPECT_EQ(all->items.size(), 7u);
  EXPECT_FALSE(all->resourceVersion.empty());
}

bool runApiserver(const std::string& verb) {
  const char* ctl = std::getenv("KSHARD_APISERVER_CTL");
  if (ctl == nullptr || *ctl == '\0') {
    ADD_FAILURE() << "KSHARD_APISERVER_CTL is not set: point it at e2e/cluster/apiserver.sh "
                     "(e2e/kube/run.sh does)";
    return false;
  }
  const std::string cmd = std::string(ctl) + " " + verb;
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return rc == 0;
}

TEST_F(KubeIntegrationTest, WatchSurvivesAnApiServerRestartWithoutLosingOrRepeatingEvents) {
  const auto cm = [](const std::string& name, const std::string& v) {
    return json{{"metadata", {{"name", name}, {"labels", {{"kube-test", "watch"}}}}},
                {"data", {{"v", v}}}};
  };
  for (const char* name : {"w1", "w2", "w3"}) {
    ASSERT_TRUE(api().create(resources::kConfigMaps, ns(), cm(name, "0")).ok());
  }
  testing::SeenEvents seen([](const json& o) { return o["data"].value("v", ""); });
  SeededRandom random(11);
  InformerOptions o;
  o.resource = resources::kConfigMaps;
  o.ns = ns();
  o.labelSelector = "kube-test=watch";
  Informer informer(api(), *scheduler_, random, Logger("kube-integration", LogLevel::kWarn), o);
  informer.addHandler(seen.handler());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(seconds(30)));
  ASSERT_TRUE(waitUntil([&] { return seen.all().size() == 3; }, seconds(10), "3 adds"));
  // A change seen live before the restart.
  auto w3 = api().get(resources::kConfigMaps, ns(), "w3");
  ASSERT_TRUE(w3.ok());
  (*w3)["data"]["v"] = "1";
  ASSERT_TRUE(api().update(resources::kConfigMaps, ns(), *w3).ok());
  ASSERT_TRUE(waitUntil([&] { return seen.all().size() == 4; }, seconds(10), "update w3"));

  ASSERT_TRUE(runApiserver("stop"));
  ASSERT_TRUE(runApiserver("start"));
  // Changes made while the informer is still reconnecting reach it exactly once.
  auto w1 = api().get(resources::kConfigMaps, ns(), "w1");
  ASSERT_TRUE(w1.ok()) << w1.status().toString();
  (*w1)["data"]["v"] = "2";
  ASSERT_TRUE(api().update(resources::kConfigMaps, ns(), *w1).ok());
  ASSERT_TRUE(api().remove(resources::kConfigMaps, ns(), "w2").ok());
  ASSERT_TRUE(api().create(resources::kConfigMaps, ns(), cm("w4", "0")).ok());

  ASSERT_TRUE(waitUntil([&] { return seen.all().size() >= 7; }, seconds(90),
                        "the three changes made after the restart"));
  // A last change as a marker: events arrive in order, so a repeat of an earlier one would come
  // before it.
  auto w4 = api().get(resources::kConfigMaps, ns(), "w4");
  ASSERT_TRUE(w4.ok());
  (*w4)["data"]["v"] = "3";
  ASSERT_TRUE(api().update(resources::kConfigMaps, ns(), *w4).ok());
  ASSERT_TRUE(waitUntil([&] { return seen.all().size() >= 8; }, seconds(30), "update w4"));
  // In the order they happened when the resumed watch delivered them; in the relist's order,
  // with the deletion inferred ("unknown"), when the informer had to relist after them.
  auto events = seen.all();
  ASSERT_EQ(events.size(), 8u) << ::testing::PrintToString(events);
  EXPECT_EQ(std::vector<std::string>(events.begin(), events.begin() + 4),
            (std::vector<std::string>{"add w1@0 initial", "add w2@0 initial", "add w3@0 initial",
                                      "update w3 0->1"}));
  std::vector<std::string> afterRestart(events.begin() + 4, events.begin() + 7);
  for (auto& e : afterRestart) {
    if (e == "delete w2@0 unknown") e = "delete w2@0";
  }
  std::sort(afterRestart.begin(), afterRestart.end());
  EXPECT_EQ(afterRestart, (std::vector<std::string>{"add w4@0", "delete w2@0", "update w1 0->2"}));
  EXPECT_EQ(events[7], "update w4 0->3");
  EXPECT_EQ(informer.store().keys(),
            (std::vector<std::string>{ns() + "/w1", ns() + "/w3", ns() + "/w4"}));
  const auto stats = informer.stats();
  std::cerr << "informer after the restart: lists=" << stats.lists << " watches=" << stats.watches
            << " failures=" << stats.failures << "\n";
  informer.stop();
}

// One candidate in the election test, on its own connection.
struct Elector {
  Elector(const Config& config, Scheduler& scheduler, const std::string& ns, const std::string& id,
          std::uint64_t seed)
      : conn(config, scheduler, seed) {
    LeaderElectionConfig c;
    c.leaseNamespace = ns;
    c.leaseName = "kube-test-election";
    c.identity = id;
    // Shorter than client-go's 15/10/2 to keep the test short; same proportions and rules.
    c.leaseDuration = seconds(6);
    c.renewDeadline = seconds(4);
    c.retryPeriod = seconds(1);
    c.requestTimeout = seconds(2);
    elector = std::make_unique<LeaderElector>(
        *conn.client, scheduler, conn.random, conn.logger, c,
        LeaderCallbacks{.onStartedLeading =
                            [this] {
                              std::lock_guard lock(mu);
                              started = std::chrono::steady_clock::now();
                              leading = true;
                            },
                        .onStoppedLeading =
                            [this] {
                              std::lock_guard lock(mu);
                              stopped = std::chrono::steady_clock::now();
                              leading = false;
                            },
                        .onNewLeader = nullptr,
                        .onRenewed = nullptr});
  }
  bool isLeading() {
    std::lock_guard lock(mu);
    return leading;
  }
  std::optional<std::chrono::steady_clock::time_point> startedAt() {
    std::lock_guard lock(mu);
    return started;
  }
  std::optional<std::chrono::steady_clock::time_point> stoppedAt() {
    std::lock_guard lock(mu);
    return stopped;
  }

  Connection conn;
  std::unique_ptr<LeaderElector> elector;
  std::mutex mu;
  bool leading = false;
  std::optional<std::chrono::steady_clock::time_point> started, stopped;
};

TEST_F(KubeIntegrationTest, TwoElectorsOnOneLeaseHaveOneLeaderAndHandOver) {
  Elector a(*config_, *scheduler_, ns(), "candidate-a", 21);
  Elector b(*config_, *scheduler_, ns(), "candidate-b", 22);
  ASSERT_TRUE(a.elector->start().ok());
  ASSERT_TRUE(waitUntil([&] { return a.isLeading(); }, seconds(20), "candidate-a to lead"));
  ASSERT_TRUE(b.elector->start().ok());

  // Both campaign for a while: never two leaders.
  const auto watchFor = [&](Duration d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
      ASSERT_FALSE(a.isLeading() && b.isLeading()) << "two leaders";
      std::this_thread::sleep_for(milliseconds(20));
    }
  };
  watchFor(seconds(4));
  EXPECT_TRUE(a.isLeading());
  EXPECT_FALSE(b.isLeading());
  const std::string rvOfA = a.elector->leaseResourceVersion();
  ASSERT_FALSE(rvOfA.empty());

  // Partition the leader: it must stop leading before the other starts, and the other takes over
  // within a lease duration of the leader's last renewal.
  const auto cutAt = std::chrono::steady_clock::now();
  a.conn.transport->cut = true;
  ASSERT_TRUE(waitUntil([&] { return b.isLeading(); }, seconds(20), "candidate-b to take over"));
  const auto aStopped = a.stoppedAt();
  const auto bStarted = b.startedAt();
  ASSERT_TRUE(aStopped.has_value()) << "the partitioned leader never stopped leading";
  ASSERT_TRUE(bStarted.has_value());
  EXPECT_LT(*aStopped, *bStarted) << "leaders overlapped";
  // Last renewal at most a retry period before the cut; then lease duration, plus up to 1.2
  // retry periods of polling and a second of slack for real requests.
  EXPECT_LT(*bStarted - cutAt, seconds(6) + seconds(1) + milliseconds(1200) + seconds(1));
  EXPECT_GE(*bStarted - cutAt, seconds(6) - seconds(1));

  // The deposed leader's view is stale: a write with it fails on resourceVersion.
  a.conn.transport->cut = false;
  const std::string staleRv = a.elector->leaseResourceVersion();
  auto lease = api().get(resources::kLeases, ns(), "kube-test-election");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "candidate-b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  json takeBack = *lease;
  takeBack["metadata"]["resourceVersion"] = staleRv;
  takeBack["spec"]["holderIdentity"] = "candidate-a";
  auto write = a.conn.client->update(resources::kLeases, ns(), takeBack);
  EXPECT_EQ(write.status().code(), StatusCode::kConflict) << write.status().toString();

  // Healed, the old leader follows; the leader stopping (releasing) hands over within a retry
  // period or so.
  watchFor(seconds(3));
  EXPECT_TRUE(b.isLeading());
  EXPECT_FALSE(a.isLeading());
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  const auto releaseAt = std::chrono::steady_clock::now();
  b.elector->stop([&] {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return released; }));
  }
  ASSERT_TRUE(waitUntil([&] { return a.isLeading(); }, seconds(10), "candidate-a to lead again"));
  EXPECT_LT(std::chrono::steady_clock::now() - releaseAt, seconds(4));
  a.elector->stop();
}

TEST_F(KubeIntegrationTest, EventsAreWrittenAndRepeatsBecomeASeries) {
  EventRecorderOptions o;
  o.reportingController = "kshard.io/kube-test";
  o.reportingInstance = "kube-integration-test";
  EventRecorder recorder(api(), *scheduler_, Logger("kube-integration", LogLevel::kWarn), o);
  auto target = api().create(resources::kConfigMaps, ns(), {{"metadata", {{"name", "evented"}}}});
  ASSERT_TRUE(target.ok());
  json ref = *target;
  ref["apiVersion"] = "v1";
  ref["kind"] = "ConfigMap";
  const auto regarding = ObjectReference::of(ref);
  recorder.record(regarding, EventType::kNormal, "Tested", "Test", "first");
  ASSERT_TRUE(waitUntil([&] { return recorder.stats().created == 1; }, seconds(10),
                        "the event to be created"));
  recorder.record(regarding, EventType::kNormal, "Tested", "Test", "first");
  ASSERT_TRUE(
      waitUntil([&] { return recorder.stats().patched == 1; }, seconds(10), "the series patch"));
  auto events = api().listAll(resources::kEvents, ns());
  ASSERT_TRUE(events.ok()) << events.status().toString();
  int found = 0;
  for (const auto& e : events->items) {
    if (e["regarding"].value("name", "") != "evented") continue;
    ++found;
    EXPECT_EQ(e["reason"], "Tested");
    EXPECT_EQ(e["series"]["count"], 2);
    EXPECT_EQ(e["reportingController"], "kshard.io/kube-test");
  }
  EXPECT_EQ(found, 1);
  EXPECT_EQ(recorder.stats().dropped, 0u);
}

}  // namespace
}  // namespace kshard::kube
