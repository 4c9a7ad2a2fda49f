#include "tools/plan_command.h"

#include <istream>
#include <iterator>
#include <ostream>
#include <string>

#include "base/random.h"
#include "tools/planning_problem.h"

namespace kshard::tools {
namespace {

constexpr char kName[] = "plan";

constexpr char kUsage[] = R"(Usage: kshardctl plan < problem.json

Reads a planning problem as JSON on stdin and prints the moves the kshard planner decides
for one rebalance round, as the operator would (DESIGN.md, "The planner"). The same input
and seed always give the same output.

Input (unknown fields are ignored):
  shards          required  integer, 1..100000
  pods            required  array of pods in registration order (ties go to the first):
                    name         required  string, unique
                    version      required  string (only the newest version receives)
                    ready        optional  bool, default true
                    terminating  optional  bool, default false
  assignments     optional  object, pod name -> its shards in range form ("1-120,151-180");
                            shards in no pod's ranges are unassigned. Default {}.
  immediate       optional  bool, default false; true places only unassigned shards, uncapped
  rebalanceRate   optional  number in (0, 1], default 0.02 (the ShardMap default): in a
                            periodic round a pod receives at most ceil(rate x shards) shards
  seed            optional  non-negative integer, default 0: seeds the random sample of
                            shards that over-full pods offer

Output, one line, moves in the order the planner decided them ("from" is null for a shard
that was unassigned):
  {"moves": [{"shard": 2, "from": "p1", "to": "p2"}]}

Exit status: 0 on success; 2 on bad input, with one line on stderr naming the problem.

Example:
  echo '{"shards": 4, "pods": [{"name": "p1", "version": "1.0.0"},
         {"name": "p2", "version": "1.0.0"}], "assignments": {"p1": "1-3", "p2": "4"},
         "rebalanceRate": 1.0, "seed": 7}' | kshardctl plan
)";

int run(std::span<const std::string> args, CommandIo& io) {
  if (!args.empty()) {
    return usageError(
        io, kName, "unexpected argument \"" + args.front() + "\" (the problem is read from stdin)");
  }
  const std::string text{std::istreambuf_iterator<char>(io.in), std::istreambuf_iterator<char>()};
  StatusOr<PlanningProblem> problem = parsePlanningProblem(text);
  if (!problem.ok()) return usageError(io, kName, problem.status().message());
  SeededRandom random(problem->seed);
  StatusOr<std::vector<sharding::Move>> moves = sharding::decide(problem->input, random);
  if (!moves.ok()) {
    // parsePlanningProblem checks everything decide() does; reaching this is a bug.
    io.err << "kshardctl plan: internal error: " << moves.status().message() << "\n";
    return kExitFailure;
  }
  io.out << formatMoves(*moves, problem->podNames) << "\n";
  return kExitOk;
}

}  // namespace

const Command& planCommand() {
  static const Command command{kName, "print the planner's decision for a problem read from stdin",
                               kUsage, run};
  return command;
}

}  // namespace kshard::tools
