#include "tools/planning_problem.h"

#include <gtest/gtest.h>

#include <string>

namespace kshard::tools {
namespace {

using sharding::kNoPod;
using sharding::Move;

constexpr char kExample[] =
    R"({"shards": 4, "pods": [{"name": "p1", "version": "1.0.0"},
        {"name": "p2", "version": "1.0.0", "ready": true, "terminating": false}],
        "assignments": {"p1": "1-3", "p2": "4"}, "immediate": false, "rebalanceRate": 1.0,
        "seed": 7})";

std::string errorOf(std::string_view json) {
  StatusOr<PlanningProblem> p = parsePlanningProblem(json);
  EXPECT_FALSE(p.ok()) << json;
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  return p.status().message();
}

TEST(PlanningProblemTest, ParsesTheExample) {
  StatusOr<PlanningProblem> p = parsePlanningProblem(kExample);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ(p->input.shardCount, 4);
  EXPECT_EQ(p->podNames, (std::vector<std::string>{"p1", "p2"}));
  EXPECT_EQ(p->input.owners, (std::vector<sharding::PodIndex>{0, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(p->input.rebalanceRate, 1.0);
  EXPECT_FALSE(p->input.immediate);
  EXPECT_EQ(p->seed, 7u);
  EXPECT_EQ(p->input.pods[0].version, "1.0.0");
  EXPECT_TRUE(p->input.pods[0].ready);
  EXPECT_FALSE(p->input.pods[0].terminating);
}

TEST(PlanningProblemTest, OptionalFieldsTakeTheirDefaults) {
  StatusOr<PlanningProblem> p = parsePlanningProblem(
      R"({"shards": 3, "pods": [{"name": "a", "version": ""}], "future": {"x": 1}})");
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ(p->input.owners, (std::vector<sharding::PodIndex>{kNoPod, kNoPod, kNoPod}));
  EXPECT_DOUBLE_EQ(p->input.rebalanceRate, 0.02);
  EXPECT_FALSE(p->input.immediate);
  EXPECT_EQ(p->seed, 0u);
}

TEST(PlanningProblemTest, ErrorsNameTheProblem) {
  EXPECT_EQ(errorOf(R"({"pods": []})"), "shards: is required");
  EXPECT_EQ(errorOf(R"({"shards": "4", "pods": []})"), "shards: must be an integer");
  EXPECT_EQ(errorOf(R"({"shards": 0, "pods": []})"), "shards: must be in 1..100000");
  EXPECT_EQ(errorOf(R"({"shards": 4})"), "pods: is required");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": {}})"), "pods: must be an array");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"version": "1"}]})"), "pods[0].name: is required");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a"}]})"), "pods[0].version: is required");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a", "version": "1", "ready": "yes"}]})"),
            "pods[0].ready: must be true or false");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "", "version": "1"}]})"),
            "pods[0].name: must not be empty");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [3]})"), "pods[0]: must be a JSON object");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a", "version": "1"},
                                             {"name": "a", "version": "2"}]})"),
            "pods[1].name: duplicate pod \"a\"");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a", "version": "1"}],
                      "assignments": {"b": "1"}})"),
            "assignments: unknown pod \"b\" (not in pods)");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a", "version": "1"}],
                      "assignments": {"a": 1}})"),
            "assignments.a: must be a string");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a", "version": "1"}],
                      "assignments": {"a": "1-5"}})"),
            "assignments.a: part \"1-5\" is outside 1..4");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [{"name": "a", "version": "1"},
                                             {"name": "b", "version": "1"}],
                      "assignments": {"a": "1-3", "b": "3-4"}})"),
            "assignments.b: shard 3 is also assigned to \"a\"");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [], "assignments": []})"),
            "assignments: must be an object");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [], "rebalanceRate": 0})"),
            "rebalanceRate: must be > 0 and <= 1");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [], "rebalanceRate": 1.5})"),
            "rebalanceRate: must be > 0 and <= 1");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [], "immediate": 1})"),
            "immediate: must be true or false");
  EXPECT_EQ(errorOf(R"({"shards": 4, "pods": [], "seed": -1})"),
            "seed: must be a non-negative integer");
  EXPECT_EQ(errorOf("[1, 2]"), "document: must be a JSON object");
  EXPECT_EQ(errorOf("{\"shards\": 4,").rfind("invalid JSON: ", 0), 0u);
}

TEST(PlanningProblemTest, FormatsMovesInOrderWithNullForUnassigned) {
  const std::vector<std::string> names = {"p1", "p\"2"};
  EXPECT_EQ(formatMoves({}, names), R"({"moves": []})");
  EXPECT_EQ(formatMoves({Move{2, 0, 1}, Move{9, std::nullopt, 0}}, names),
            R"({"moves": [{"shard": 2, "from": "p1", "to": "p\"2"}, )"
            R"({"shard": 9, "from": null, "to": "p1"}]})");
}

}  // namespace
}  // namespace kshard::tools
