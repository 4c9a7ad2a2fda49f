#include "tools/kshardctl.h"

#include <array>
#include <ostream>

#include "tools/doctor_command.h"
#include "tools/plan_command.h"
#include "tools/shard_map_commands.h"
#include "tools/shard_of_command.h"
#include "tools/simulate_command.h"

namespace kshard::tools {
namespace {

std::array<const Command*, 7> commands() {
  return {&shardOfCommand(), &ownerCommand(),    &mapCommand(),   &topCommand(),
          &planCommand(),    &simulateCommand(), &doctorCommand()};
}

void printUsage(std::ostream& os) {
  os << "Usage: kshardctl <command> [arguments]\n\n"
        "kshardctl computes what kshard's sharding core computes: which shard an entity\n"
        "belongs to and, from the cluster, which pod owns it and which pods and shards are\n"
        "busiest; which shards a rebalance round moves; how rebalancing plays out over time\n"
        "against other strategies. Installed as kubectl-kshard on the PATH, it is the kubectl\n"
        "plugin `kubectl kshard <command>`.\n\n"
        "Commands:\n";
  for (const Command* c : commands()) {
    os << "  " << c->name << std::string(12 - c->name.size(), ' ') << c->summary << "\n";
  }
  os << "\nRun 'kshardctl <command> --help' for the usage of one command.\n"
        "Exit status: 0 on success, 2 on bad arguments or input, 1 on other failures.\n";
}

}  // namespace

int runKshardctl(std::span<const std::string> args, std::istream& in, std::ostream& out,
                 std::ostream& err) {
  CommandIo io{in, out, err};
  if (args.empty()) {
    printUsage(err);
    return kExitUsage;
  }
  const std::string& name = args.front();
  if (name == "-h" || name == "--help" || name == "help") {
    printUsage(out);
    return kExitOk;
  }
  for (const Command* c : commands()) {
    if (c->name != name) continue;
    const std::span<const std::string> rest = args.subspan(1);
    if (wantsHelp(rest)) {
      out << c->usage;
      return kExitOk;
    }
    return c->run(rest, io);
  }
  err << "kshardctl: unknown command \"" << name << "\"\n\n";
  printUsage(err);
  return kExitUsage;
}

}  // namespace kshard::tools
