// The faults of docs/reliability.md that three real sidecars and a stub operator can show
// (tests/sidecar/component_fixture.h): each test failed before the mechanism it names existed.
#include "sidecar/ownership_lease.h"
#include "tests/sidecar/component_fixture.h"

namespace kshard::sidecar {
namespace {

// Entities whose shard `pod` owns, `count` of them.
std::vector<std::string> entitiesOf(StubOperator& op, const std::string& pod, std::size_t count,
                                    const std::string& prefix) {
  std::vector<std::string> ids;
  for (int i = 0; ids.size() < count; ++i) {
    const std::string id = prefix + std::to_string(i);
    if (op.ownerOf(*sharding::shardIdOf(id, kShards)) == pod) ids.push_back(id);
  }
  return ids;
}

std::vector<sharding::ShardId> shardsOfIds(const std::vector<std::string>& ids) {
  std::set<sharding::ShardId> out;
  for (const auto& id : ids) out.insert(*sharding::shardIdOf(id, kShards));
  return {out.begin(), out.end()};
}

class SidecarFaultsTest : public SidecarComponentTest {
 protected:
  void expectNoViolation() {
    std::lock_guard lock(world_.mu);
    EXPECT_TRUE(world_.violations.empty())
        << world_.violations.size() << " violations, first: " << world_.violations.front();
  }
  long valueOf(const StatusOr<http::Response>& r) {
    if (!r.ok() || r->status != 200) return -1;
    return json::parse(r->body)["value"].get<long>();
  }
};

// The sidecar's container alone is killed (an OOM kill at its memory limit) while its app keeps
// running with entities: the restarted sidecar knows none of them. It must have the app drop
// them before it registers; otherwise, when their shards move, it releases them at once without
// a stop, the app keeps a stale copy that another pod then runs too, and a later return of the
// shard overwrites newer state with it.
TEST_F(SidecarFaultsTest, ASidecarRestartedUnderItsRunningAppResetsTheAppBeforeItServesAgain) {
  Sidecar& p1 = *sidecars_[0];
  const auto ids = entitiesOf(operator_, "p1", 6, "restarted-");
  for (const auto& id : ids) ASSERT_EQ(valueOf(increment(p1, id)), 1) << id;
  ASSERT_EQ(apps_[0]->active(), ids.size());
  EXPECT_EQ(apps_[0]->resets(), 1) << "the first start did not reset the app";

  restart(p1);
  ASSERT_TRUE(waitFor([&] { return ready(p1); }, seconds(30)))
      << "the restarted sidecar did not become ready; its log:\n"
      << p1.process->logTail();
  EXPECT_EQ(apps_[0]->resets(), 2) << "the restarted sidecar did not reset its app";
  EXPECT_EQ(apps_[0]->active(), 0u) << "the app kept entities its new sidecar does not know";
  const auto registered = operator_.registrations();
  ASSERT_EQ(std::count_if(registered.begin(), registered.end(),
                          [](const std::string& r) { return r.rfind("p1/", 0) == 0; }),
            2);
  // Its shards move to p2, and the entities run there from their saved state.
  ASSERT_TRUE(operator_.move("p1", "p2", shardsOfIds(ids)));
  for (const auto& id : ids) {
    EXPECT_EQ(valueOf(increment(*sidecars_[1], id)), 2) << id << " lost its saved state";
  }
  expectNoViolation();
}

// A message forwarded to its owner, whose sidecar dies while the owner's app has it: the sender
// cannot tell whether it was applied, so it answers OutcomeUnknown and sends it nowhere else,
// even when the shard has a new owner by then.
TEST_F(SidecarFaultsTest, AForwardedMessageWhoseOwnerDiesIsNeitherRetriedNorLost) {
  const std::string id = entitiesOf(operator_, "p2", 1, "in-flight-")[0];
  ASSERT_EQ(valueOf(increment(*sidecars_[1], id)), 1);
  apps_[1]->holdAnswers(true);
  auto sent = std::async(std::launch::async, [&] { return increment(*sidecars_[0], id); });
  ASSERT_TRUE(waitFor([&] { return apps_[1]->held() == 1; }, seconds(10)))
      << "the message did not reach the owner's app";
  // The owner's sidecar dies with the message at its app; its shards go to p3 at once (as
  // they would once nothing of the pod can run).
  sidecars_[1]->process->signal(SIGKILL);
  ASSERT_EQ(sidecars_[1]->process->wait(seconds(10)), 128 + SIGKILL);
  operator_.reassignFromDead("p2", "p3", operator_.shardsOf("p2"));
  ASSERT_EQ(sent.wait_for(seconds(15)), std::future_status::ready);
  const auto r = sent.get();
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_EQ(r->headers.get(protocol::kErrorHeader), protocol::errors::kOutcomeUnknown) << r->body;
  apps_[1]->releaseHeld();
  EXPECT_EQ(apps_[0]->received(id) + apps_[2]->received(id), 0)
      << "the message was sent again to another pod";
  EXPECT_EQ(apps_[1]->received(id), 2);
}

// A caller that retries after OutcomeUnknown names the request with an Idempotency-Key, which
// reaches the owner's app unchanged so that it can recognise the retry.
TEST_F(SidecarFaultsTest, TheIdempotencyKeyReachesTheOwnersApp) {
  const std::string id = entitiesOf(operator_, "p3", 1, "keyed-")[0];
  http::Request r;
  r.method = http::Method::kPost;
  r.target = "/v1/entities/counter/" + id;
  r.headers.set(std::string(protocol::kIdempotencyKeyHeader), "order-42");
  r.body = R"({"op":"increment"})";
  auto answer = sidecars_[0]->api->sendSync(std::move(r));
  ASSERT_TRUE(answer.ok() && answer->status == 200);
  EXPECT_EQ(apps_[2]->idempotencyKey(id), "order-42");
}

// The operator does not confirm the pods' ownership (it is unreachable, and these sidecars have
// no API server to ask instead): within the lease, each sidecar stops its entities and delivers
// nothing, so that the operator could give its shards away; a renewal lifts the fence.
class SidecarLeaseTest : public SidecarFaultsTest {
 protected:
  void configureMap(sharding::ShardMapSpec& spec) override {
    spec.ownershipLease = seconds(3);
    spec.sendTimeout = seconds(2);
    spec.entityIdleTimeout = Duration::zero();  // only the fence stops an entity here
  }
};

TEST_F(SidecarLeaseTest, ASidecarThatCannotConfirmItsOwnershipFencesItself) {
  const auto ids = entitiesOf(operator_, "p1", 4, "fenced-");
  for (const auto& id : ids) ASSERT_EQ(valueOf(increment(*sidecars_[0], id)), 1) << id;
  operator_.renewing_.store(false);
  ASSERT_TRUE(waitFor([&] { return apps_[0]->active() == 0; }, seconds(10)))
      << "p1 kept its entities after its lease ran out";
  const auto refused = increment(*sidecars_[1], ids[0]);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 504) << refused->body;
  EXPECT_EQ(apps_[0]->received(ids[0]), 1) << "a fenced pod delivered a message";
  operator_.renewing_.store(true);
  ASSERT_TRUE(waitFor([&] { return valueOf(increment(*sidecars_[1], ids[0])) == 2; }, seconds(10)))
      << "p1 did not serve again once its lease was renewed";
  expectNoViolation();
}

// A drain that is not followed by the pod's end (asked by hand here, or the app container's
// preStop when only the app restarts) must not leave the pod drained for good: unless the
// operator said the pod is being deleted, the sidecar registers again after the linger.
class SidecarDrainTest : public SidecarFaultsTest {
 protected:
  std::vector<std::string> extraArgs() const override {
    return {"--drain-linger=1s", "--drain-token=t0ken"};
  }
};

TEST_F(SidecarDrainTest, ADrainNotFollowedByTheEndOfThePodIsUndone) {
  Sidecar& p1 = *sidecars_[0];
  operator_.terminating_.store(false);
  const auto drain = [&](const char* token) {
    http::Request r;
    r.target = "/v1/drain";
    if (token != nullptr) r.headers.set(std::string(protocol::kDrainTokenHeader), token);
    return p1.admin->sendSync(std::move(r));
  };
  // The drain hook is the kubelet's: without the pod's token it is refused.
  for (const char* token : {static_cast<const char*>(nullptr), "wrong"}) {
    auto refused = drain(token);
    ASSERT_TRUE(refused.ok());
    EXPECT_EQ(refused->status, 403) << refused->body;
  }
  EXPECT_TRUE(ready(p1));
  auto drained = drain("t0ken");
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(drained->status, 200) << drained->body;
  ASSERT_TRUE(waitFor([&] { return operator_.pods().size() == 2; }, seconds(10)));
  ASSERT_TRUE(waitFor([&] { return operator_.pods().size() == 3 && ready(p1); }, seconds(15)))
      << "the drained pod did not register again; its log:\n"
      << p1.process->logTail();
  // It takes shards again.
  const auto ids = entitiesOf(operator_, "p2", 1, "back-");
  ASSERT_TRUE(operator_.move("p2", "p1", shardsOfIds(ids)));
  auto r = increment(p1, ids[0]);
  EXPECT_EQ(valueOf(r), 1) << (r.ok() ? r->body : r.status().toString());
  EXPECT_EQ(apps_[0]->received(ids[0]), 1) << "p1's app did not run the entity";
  expectNoViolation();
}

}  // namespace
}  // namespace kshard::sidecar
