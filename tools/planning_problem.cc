#include "tools/planning_problem.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sharding/json_field_reader.h"
#include "sharding/shard_set.h"

namespace kshard::tools {
namespace {

using nlohmann::json;
using sharding::JsonFieldReader;
using sharding::PodIndex;

// A pod name as JSON, so names with quotes or control characters stay on one line.
std::string jsonQuoted(const std::string& name) { return json(name).dump(); }

Status readPods(JsonFieldReader& root, PlanningProblem& problem,
                std::unordered_map<std::string, PodIndex>& indexByName) {
  const json* pods = root.requiredArray("pods");
  if (pods == nullptr) return root.status();
  for (std::size_t i = 0; i < pods->size(); ++i) {
    JsonFieldReader pod((*pods)[i], JsonFieldReader::elementPath("pods", i));
    sharding::PlannerPod p;
    std::string name = pod.requiredString("name");
    p.version = pod.requiredString("version");
    p.ready = pod.optionalBool("ready", true);
    p.terminating = pod.optionalBool("terminating", false);
    if (pod.ok() && name.empty()) pod.fail("name", "must not be empty");
    if (pod.ok() && !indexByName.emplace(name, static_cast<PodIndex>(i)).second) {
      pod.fail("name", "duplicate pod " + jsonQuoted(name));
    }
    if (!pod.ok()) return pod.status();
    problem.input.pods.push_back(std::move(p));
    problem.podNames.push_back(std::move(name));
  }
  return {};
}

Status readAssignments(JsonFieldReader& root, PlanningProblem& problem,
                       const std::unordered_map<std::string, PodIndex>& indexByName) {
  const json* assignments = root.optionalObject("assignments");
  if (assignments == nullptr) return root.status();
  JsonFieldReader fields(*assignments, "assignments");
  for (const auto& [name, value] : assignments->items()) {
    auto pod = indexByName.find(name);
    if (pod == indexByName.end()) {
      root.fail("assignments", "unknown pod " + jsonQuoted(name) + " (not in pods)");
      return root.status();
    }
    const std::string ranges = fields.requiredString(name);
    if (!fields.ok()) return fields.status();
    StatusOr<sharding::ShardSet> shards =
        sharding::ShardSet::parse(ranges, problem.input.shardCount);
    if (!shards.ok()) {
      fields.fail(name, shards.status().message());
      return fields.status();
    }
    for (const sharding::ShardRange& r : shards->ranges()) {
      for (sharding::ShardId s = r.first; s <= r.last; ++s) {
        PodIndex& owner = problem.input.owners[static_cast<std::size_t>(s - 1)];
        if (owner != sharding::kNoPod) {
          fields.fail(name, "shard " + std::to_string(s) + " is also assigned to " +
                                jsonQuoted(problem.podNames[static_cast<std::size_t>(owner)]));
          return fields.status();
        }
        owner = pod->second;
      }
    }
  }
  return {};
}

}  // namespace

StatusOr<PlanningProblem> parsePlanningProblem(std::string_view text) {
  StatusOr<json> parsed = sharding::parseJson(text);
  if (!parsed.ok()) return parsed.status();
  JsonFieldReader root(*parsed, "");
  PlanningProblem problem;
  problem.input.shardCount = static_cast<std::int32_t>(
      root.requiredInt("shards", sharding::kMinShardCount, sharding::kMaxShardCount));
  problem.input.immediate = root.optionalBool("immediate", false);
  problem.input.rebalanceRate = root.optionalNumber("rebalanceRate", kDefaultPlanRebalanceRate);
  if (root.ok() && !(problem.input.rebalanceRate > 0 && problem.input.rebalanceRate <= 1)) {
    root.fail("rebalanceRate", "must be > 0 and <= 1");
  }
  problem.seed = root.optionalUint64("seed", 0);
  if (!root.ok()) return root.status();
  problem.input.owners.assign(static_cast<std::size_t>(problem.input.shardCount), sharding::kNoPod);
  std::unordered_map<std::string, PodIndex> indexByName;
  if (Status s = readPods(root, problem, indexByName); !s.ok()) return s;
  if (Status s = readAssignments(root, problem, indexByName); !s.ok()) return s;
  return problem;
}

std::string formatMoves(const std::vector<sharding::Move>& moves,
                        const std::vector<std::string>& podNames) {
  std::string out = "{\"moves\": [";
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const sharding::Move& m = moves[i];
    if (i > 0) out += ", ";
    out += "{\"shard\": " + std::to_string(m.shard) + ", \"from\": ";
    out += m.from ? jsonQuoted(podNames[static_cast<std::size_t>(*m.from)]) : "null";
    out += ", \"to\": " + jsonQuoted(podNames[static_cast<std::size_t>(m.to)]) + "}";
  }
  out += "]}";
  return out;
}

}  // namespace kshard::tools
