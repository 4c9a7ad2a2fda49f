#include "kube/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>

#include "kube/api_time.h"
#include "kube/object_store.h"
#include "tests/kube/fake_api_server.h"

namespace kshard::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeApiServer;

// A candidate: its own client (over a connection the test can cut) and elector, sharing one
// simulated clock and one fake API server with the others.
struct Candidate {
  // Fails every request while `cut` is set: a network partition between this candidate and the
  // API server.
  class Link final : public http::Client {
   public:
    explicit Link(http::Client& server) : server_(server) {}
    void send(http::Request r, http::ResponseCallback done) override {
      if (cut) {
        done(unavailable("connection refused"));
        return;
      }
      if (delay > Duration{0} && scheduler != nullptr) {
        scheduler->runAfter(delay, [this, r = std::move(r), done = std::move(done)]() mutable {
          server_.send(std::move(r), std::move(done));
        });
        return;
      }
      server_.send(std::move(r), std::move(done));
    }
    StatusOr<std::unique_ptr<http::ResponseStream>> openStream(http::Request r) override {
      return server_.openStream(std::move(r));
    }
    std::atomic<bool> cut{false};
    // Requests reach the server this much later (a slow API server), on `scheduler`.
    Duration delay{0};
    ManualScheduler* scheduler = nullptr;

   private:
    http::Client& server_;
  };

  Candidate(const std::string& id, FakeApiServer& server, ManualScheduler& scheduler,
            std::uint64_t seed, LeaderElectionConfig config = {})
      : link(server), random(seed) {
    link.scheduler = &scheduler;
    ClientOptions o;
    o.qps = 0;
    o.maxRetries = 0;
    client = std::make_unique<Client>(link, scheduler, random, logger, o);
    config.leaseNamespace = "kshard-system";
    config.leaseName = "kshard-operator";
    config.identity = id;
    elector = std::make_unique<LeaderElector>(
        *client, scheduler, random, logger, config,
        LeaderCallbacks{.onStartedLeading =
                            [this, &scheduler] {
                              ++started;
                              startedAt = scheduler.clock().now();
                            },
                        .onStoppedLeading =
                            [this, &scheduler] {
                              ++stopped;
                              stoppedAt = scheduler.clock().now();
                            },
                        .onNewLeader = [this](const std::string& l) { leaders.push_back(l); },
                        .onRenewed = [this](SteadyTime at) { renewedAt.push_back(at); }});
  }

  Link link;
  SeededRandom random;
  Logger logger{"kube-test", LogLevel::kError, [](std::string_view) {}};
  std::unique_ptr<Client> client;
  std::unique_ptr<LeaderElector> elector;
  int started = 0;
  int stopped = 0;
  SteadyTime startedAt{};
  SteadyTime stoppedAt{};
  std::vector<SteadyTime> renewedAt;  // every acquire and renewal, at the write's start
  std::vector<std::string> leaders;
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  json lease() {
    auto l = server_.get(resources::kLeases, "kshard-system", "kshard-operator");
    EXPECT_TRUE(l.has_value()) << "no lease";
    return l.value_or(json::object());
  }
  // Advances in small steps, checking at every step that at most one candidate leads.
  void run(Duration total, std::vector<Candidate*> candidates) {
    for (Duration t{0}; t < total; t += milliseconds(100)) {
      scheduler_.advance(milliseconds(100));
      int leaders = 0;
      for (auto* c : candidates) leaders += c->elector->isLeader() ? 1 : 0;
      ASSERT_LE(leaders, 1) << "two leaders at t="
                            << scheduler_.clock().now().time_since_epoch().count();
    }
  }

  ManualScheduler scheduler_;
  FakeApiServer server_{scheduler_.clock()};
};

TEST_F(LeaderElectionTest, FirstCandidateCreatesTheLeaseAndLeads) {
  Candidate a("op-a", server_, scheduler_, 1);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  EXPECT_TRUE(a.elector->isLeader());
  EXPECT_EQ(a.started, 1);
  EXPECT_EQ(a.leaders, (std::vector<std::string>{"op-a"}));
  const json spec = lease()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "op-a");
  EXPECT_EQ(spec["leaseDurationSeconds"], 15);
  EXPECT_EQ(spec["leaseTransitions"], 0);
  const std::string now = formatMicroTime(scheduler_.clock().wallNow());
  EXPECT_EQ(spec["acquireTime"], now);
  EXPECT_EQ(spec["renewTime"], now);
}

TEST_F(LeaderElectionTest, LeaderRenewsEveryRetryPeriodKeepingAcquireTime) {
  Candidate a("op-a", server_, scheduler_, 1);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  const std::string acquired = lease()["spec"]["acquireTime"];
  scheduler_.advance(seconds(2));
  const json spec = lease()["spec"];
  EXPECT_EQ(spec["acquireTime"], acquired);
  EXPECT_EQ(spec["renewTime"], formatMicroTime(scheduler_.clock().wallNow()));
  EXPECT_EQ(spec["leaseTransitions"], 0);
  run(seconds(60), {&a});
  EXPECT_TRUE(a.elector->isLeader());
  EXPECT_EQ(a.stopped, 0);
}

TEST_F(LeaderElectionTest, FollowerTakesOverOnlyAfterTheRecordStoodStillForTheLeaseDuration) {
  Candidate a("op-a", server_, scheduler_, 1);
  Candidate b("op-b", server_, scheduler_, 2);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  ASSERT_TRUE(b.elector->start().ok());
  run(seconds(10), {&a, &b});
  EXPECT_TRUE(a.elector->isLeader());
  EXPECT_FALSE(b.elector->isLeader());
  EXPECT_EQ(b.leaders, (std::vector<std::string>{"op-a"}));

  // The leader dies without releasing, right after a renewal (they fall on every 2 s).
  a.elector.reset();
  const SteadyTime died = scheduler_.clock().now();
  run(seconds(30), {&b});
  ASSERT_TRUE(b.elector->isLeader());
  // B sees the last renewal within one jittered retry period (<= 2.4 s) and then waits a full
  // lease duration on its own clock, polling every <= 2.4 s.
  EXPECT_GE(b.startedAt - died, seconds(15));
  EXPECT_LE(b.startedAt - died, seconds(15) + 2 * milliseconds(2400));
  const json spec = lease()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "op-b");
  EXPECT_EQ(spec["leaseTransitions"], 1);
  EXPECT_EQ(b.leaders, (std::vector<std::string>{"op-a", "op-b"}));
}

TEST_F(LeaderElectionTest, ExactlyOneLeaderWhenCandidatesStartTogether) {
  Candidate a("op-a", server_, scheduler_, 1);
  Candidate b("op-b", server_, scheduler_, 2);
  Candidate c("op-c", server_, scheduler_, 3);
  ASSERT_TRUE(a.elector->start().ok());
  ASSERT_TRUE(b.elector->start().ok());
  ASSERT_TRUE(c.elector->start().ok());
  run(seconds(120), {&a, &b, &c});
  EXPECT_EQ(a.started + b.started + c.started, 1);
}

TEST_F(LeaderElectionTest, PartitionedLeaderStopsBeforeAnyoneElseStarts) {
  Candidate a("op-a", server_, scheduler_, 1);
  Candidate b("op-b", server_, scheduler_, 2);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  ASSERT_TRUE(b.elector->start().ok());
  run(seconds(5), {&a, &b});
  const SteadyTime cutAt = scheduler_.clock().now();
  a.link.cut = true;
  run(seconds(40), {&a, &b});
  EXPECT_FALSE(a.elector->isLeader());
  EXPECT_EQ(a.stopped, 1);
  ASSERT_TRUE(b.elector->isLeader());
  EXPECT_LT(a.stoppedAt, b.startedAt) << "the old leader must stop before the new one starts";
  // Its last renewal was < 2 s before the cut; it gives up a retry period plus the renew
  // deadline after that renewal.
  EXPECT_LE(a.stoppedAt - cutAt, seconds(12));
  EXPECT_GE(b.startedAt - cutAt, seconds(13));
  // What the ownership leases' grace relies on (operator/ownership_leases.h): nobody acquires
  // the lease before its holder's last renewal (reported at the write's start) plus the lease
  // duration.
  ASSERT_FALSE(a.renewedAt.empty()) << "no renewal was reported";
  EXPECT_LE(a.renewedAt.back(), cutAt);
  EXPECT_GE(b.startedAt, a.renewedAt.back() + seconds(15));
  ASSERT_FALSE(b.renewedAt.empty());
  EXPECT_GE(b.renewedAt.front(), a.renewedAt.back() + seconds(15));

  // The deposed leader's view of the lease is stale: a write with it fails on resourceVersion.
  a.link.cut = false;
  json stale = lease();
  stale["metadata"]["resourceVersion"] = a.elector->leaseResourceVersion();
  stale["spec"]["holderIdentity"] = "op-a";
  EXPECT_FALSE(a.elector->leaseResourceVersion().empty());
  EXPECT_NE(a.elector->leaseResourceVersion(), resourceVersionOf(lease()));
  auto write = a.client->update(resources::kLeases, "kshard-system", stale);
  EXPECT_EQ(write.status().code(), StatusCode::kConflict) << write.status().toString();

  // Healed, it stays a follower while the new leader renews.
  run(seconds(60), {&a, &b});
  EXPECT_TRUE(b.elector->isLeader());
  EXPECT_FALSE(a.elector->isLeader());
}

TEST_F(LeaderElectionTest, LeaseAcquiredSlowerThanTheRenewDeadlineLeadsOnlyAfterARenewal) {
  Candidate a("op-a", server_, scheduler_, 1);
  // Every request takes 13 s (an API server recovering): the acquiring attempt (a GET, then a
  // create) takes 26 s, more than the 10 s renew deadline.
  a.link.delay = seconds(13);
  ASSERT_TRUE(a.elector->start().ok());
  for (int i = 0; i < 400 && !server_.get(resources::kLeases, "kshard-system", "kshard-operator");
       ++i) {
    scheduler_.advance(milliseconds(100));
  }
  ASSERT_TRUE(server_.get(resources::kLeases, "kshard-system", "kshard-operator"))
      << "the slow attempt never created the lease";
  scheduler_.advance(milliseconds(100));
  EXPECT_EQ(a.started, 0) << "led on an acquisition its renew deadline had already run out for";
  // The API answers in time again: the confirming renewal makes it the leader, for good.
  a.link.delay = Duration{0};
  run(seconds(30), {&a});
  EXPECT_TRUE(a.elector->isLeader());
  EXPECT_EQ(a.started, 1);
  EXPECT_EQ(a.stopped, 0) << "leadership flapped";
}

TEST_F(LeaderElectionTest, StopReleasesTheLeaseSoAFollowerTakesOverWithinARetryPeriod) {
  Candidate a("op-a", server_, scheduler_, 1);
  Candidate b("op-b", server_, scheduler_, 2);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  ASSERT_TRUE(b.elector->start().ok());
  run(seconds(5), {&a, &b});
  bool done = false;
  a.elector->stop([&] {
    // Leader work stopped before the lease was given up.
    EXPECT_EQ(a.stopped, 1);
    done = true;
  });
  EXPECT_TRUE(done);
  const json spec = lease()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "");
  EXPECT_EQ(spec["leaseDurationSeconds"], 1);
  const SteadyTime released = scheduler_.clock().now();
  run(seconds(5), {&a, &b});
  ASSERT_TRUE(b.elector->isLeader());
  EXPECT_LE(b.startedAt - released, milliseconds(2400));
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaderElectionTest, AnotherHolderSeenOnRenewalStopsLeadingAtOnce) {
  Candidate a("op-a", server_, scheduler_, 1);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  json taken = lease();
  taken["spec"]["holderIdentity"] = "intruder";
  server_.put(resources::kLeases, taken);
  scheduler_.advance(seconds(2));
  EXPECT_FALSE(a.elector->isLeader());
  EXPECT_EQ(a.stopped, 1);
  EXPECT_EQ(a.elector->leader(), "intruder");
  EXPECT_EQ(a.leaders, (std::vector<std::string>{"op-a", "intruder"}));
}

TEST_F(LeaderElectionTest, LeaderThatLostCampaignsAgain) {
  Candidate a("op-a", server_, scheduler_, 1);
  ASSERT_TRUE(a.elector->start().ok());
  scheduler_.runDue();
  a.link.cut = true;
  scheduler_.advance(seconds(13));
  EXPECT_EQ(a.stopped, 1);
  a.link.cut = false;
  scheduler_.advance(seconds(3));
  EXPECT_TRUE(a.elector->isLeader());
  EXPECT_EQ(a.started, 2);
  // Still its own lease: no transition counted.
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 0);
}

TEST_F(LeaderElectionTest, ConfigIsValidatedLikeClientGo) {
  LeaderElectionConfig c;
  c.leaseNamespace = "ns";
  c.leaseName = "l";
  c.identity = "me";
  EXPECT_TRUE(validateLeaderElectionConfig(c).ok());
  c.renewDeadline = seconds(15);
  EXPECT_NE(validateLeaderElectionConfig(c).message().find("leaseDuration must be greater"),
            std::string::npos);
  c.renewDeadline = seconds(2);
  EXPECT_NE(validateLeaderElectionConfig(c).message().find("1.2 x retryPeriod"), std::string::npos);
  c.renewDeadline = seconds(10);
  c.identity = "";
  EXPECT_FALSE(validateLeaderElectionConfig(c).ok());
}

}  // namespace
}  // namespace kshard::kube
