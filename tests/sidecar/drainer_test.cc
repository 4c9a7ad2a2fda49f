// Drainer on simulated time: the drain unregisters, stops every entity, and says every 5 s
// which step it is at until it ends.
#include "sidecar/drainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/sidecar/held_host.h"
#include "tests/sidecar/scripted_client.h"

namespace kshard::sidecar {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::answer;
using testing::HeldHost;
using ::testing::IsEmpty;
using testing::ScriptedClient;
using testing::ScriptedManager;

class DrainerTest : public ::testing::Test {
 protected:
  DrainerTest()
      : manager_(testing::scriptedManagerClient(script_, table_, scheduler_, random_, quiet_,
                                                [] { return std::string(); })) {}
  ~DrainerTest() override { manager_->stop(); }

  // The progress lines logged so far.
  std::vector<json> progress() const {
    std::vector<json> out;
    for (const auto& line : lines_) {
      json j = json::parse(line);
      if (j.value("msg", "") == "draining") out.push_back(j);
    }
    return out;
  }

  Logger quiet_{"t", LogLevel::kError, [](std::string_view) {}};
  std::vector<std::string> lines_;
  std::shared_ptr<ScriptedManager> script_ = std::make_shared<ScriptedManager>();
  RoutingTable table_;
  ManualScheduler scheduler_;
  SeededRandom random_{1};
  HeldHost host_;
  EntityRegistry registry_{host_, scheduler_, {}, quiet_};
  std::unique_ptr<ManagerClient> manager_;
};

TEST_F(DrainerTest, SaysEveryFiveSecondsWhereItIsUntilItEnds) {
  ASSERT_THAT(registry_.assign({1}, 1), IsEmpty());
  for (const char* id : {"a", "b"}) {
    Message m;
    m.key = {"counter", id};
    m.shard = 1;
    registry_.deliver(std::move(m), [](DeliveryOutcome) {});
    host_.completeDelivery();
  }
  script_->answers = {answer(200, R"({"epoch":2})")};
  Drainer drainer(
      registry_, *manager_, table_, scheduler_,
      Logger("t", LogLevel::kInfo, [this](std::string_view l) { lines_.emplace_back(l); }));
  std::optional<Status> result;
  drainer.drain([&](Status st) { result = st; });
  ASSERT_EQ(script_->seen.size(), 1u);
  EXPECT_EQ(script_->seen[0].target, "/v1/shardmaps/demo/counter/unregister");
  ASSERT_EQ(host_.stops.size(), 2u);
  EXPECT_THAT(progress(), IsEmpty()) << "a progress line before 5 s";

  scheduler_.advance(5s);
  ASSERT_EQ(progress().size(), 1u);
  EXPECT_EQ(progress()[0]["step"], "stopping entities");
  EXPECT_EQ(progress()[0]["active_entities"], 2);
  EXPECT_EQ(progress()[0]["elapsed_s"], 5);

  host_.completeStop();
  scheduler_.advance(5s);
  ASSERT_EQ(progress().size(), 2u);
  EXPECT_EQ(progress()[1]["active_entities"], 1);
  EXPECT_EQ(progress()[1]["elapsed_s"], 10);

  host_.completeStop();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << result->toString();
  EXPECT_TRUE(drainer.finished());
  scheduler_.advance(30s);
  EXPECT_EQ(progress().size(), 2u) << "progress was reported after the drain ended";
}

}  // namespace
}  // namespace kshard::sidecar
