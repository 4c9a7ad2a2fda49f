#include "tools/shard_map_commands.h"

#include <optional>
#include <ostream>
#include <vector>

#include "sharding/shard_map_json.h"
#include "sharding/shard_map_segments.h"
#include "tools/kube_access.h"
#include "tools/shard_map_view.h"

namespace kshard::tools {
namespace {

constexpr char kOwnerUsage[] = R"(Usage: kshardctl owner [options] SHARDMAP ENTITY-ID...
       kubectl kshard owner [options] SHARDMAP ENTITY-ID...

Prints, for each entity id, its shard and the pod that owns that shard now, as every sidecar
computes them from the ShardMap: ENTITY SHARD POD VERSION EPOCH ("<unassigned>" while the shard
has no owner). SHARDMAP is NAME (in --namespace) or NAMESPACE/NAME.

Options:
  -n, --namespace NS   the ShardMap's namespace (default: the kubeconfig context's)
  --kubeconfig FILE    kubeconfig to use instead of the default search
  --                   every argument after it is an id (ids that start with '-')
  -h, --help           show this help

Exit status: 0 on success; 2 on bad arguments; 1 when the ShardMap cannot be read.
)";

constexpr char kMapUsage[] = R"(Usage: kshardctl map [options] SHARDMAP
       kubectl kshard map [options] SHARDMAP

Prints the ShardMap's assignment as a table: a line with its shards, epoch and manager, then each
registered pod in registration order with its version, how many shards it owns and which (ranges),
then the unassigned shards. SHARDMAP is NAME (in --namespace) or NAMESPACE/NAME.

)";

constexpr char kTopUsage[] = R"(Usage: kshardctl top pods|shards [options] SHARDMAP
       kubectl kshard top pods|shards [options] SHARDMAP

Prints the load the operator measured, from the ShardMap's status, in app busy seconds per second
(1.000: one app thread busy all the time). A header line gives the balance mode (spec.balance);
the peak-to-mean, the busiest pod's load over the mean pod load; the tolerance the operator holds
it to when balancing by load (1 + spec.loadTolerance); the hottest-shard bound, the lowest
peak-to-mean any placement reaches given the hottest shard; and the total load.

  top pods     each registered pod, busiest first: NAME SHARDS LOAD SHARE
  top shards   the hottest shards, busiest first: SHARD POD LOAD SHARE. The status keeps only
               the 10 hottest.

SHARE is the percentage of the total load; "-" marks a load not measured yet. Until the pods have
reported their load the header line says so, and the exit status is still 0. SHARDMAP is NAME (in
--namespace) or NAMESPACE/NAME.

)";

// The options and exit status of the commands that show one ShardMap (map, top).
constexpr char kViewOptions[] = R"(Options:
  -n, --namespace NS   the ShardMap's namespace (default: the kubeconfig context's)
  --kubeconfig FILE    kubeconfig to use instead of the default search
  -h, --help           show this help

Exit status: 0 on success; 2 on bad arguments; 1 when the ShardMap cannot be read.
)";

struct ClusterArgs {
  std::optional<std::string> ns;
  std::string kubeconfig;
  std::vector<std::string> positional;
};

StatusOr<ClusterArgs> parseClusterArgs(std::span<const std::string> args) {
  ClusterArgs out;
  bool onlyPositional = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (onlyPositional || a.empty() || a[0] != '-') {
      out.positional.push_back(a);
    } else if (a == "--") {
      onlyPositional = true;
    } else if (a == "-n" || a == "--namespace" || a == "--kubeconfig") {
      if (i + 1 == args.size()) return invalidArgument(a + " needs a value");
      (a == "--kubeconfig" ? out.kubeconfig : out.ns.emplace()) = args[++i];
    } else if (a.starts_with("--namespace=")) {
      out.ns = a.substr(12);
    } else if (a.starts_with("--kubeconfig=")) {
      out.kubeconfig = a.substr(13);
    } else {
      return invalidArgument("unknown option \"" + a + "\" (ids starting with '-' go after --)");
    }
  }
  if (out.positional.empty()) return invalidArgument("no ShardMap named");
  return out;
}

// The ShardMap `ref` ("name" in `ns`, or "namespace/name"), read and validated.
StatusOr<sharding::ShardMap> readShardMap(kube::Client& api, const std::string& ns,
                                          const std::string& ref) {
  const std::size_t slash = ref.find('/');
  const std::string mapNs = slash == std::string::npos ? ns : ref.substr(0, slash);
  const std::string name = slash == std::string::npos ? ref : ref.substr(slash + 1);
  StatusOr<nlohmann::json> object = api.get(kube::resources::kShardMaps, mapNs, name);
  if (!object.ok()) return object.status().withContext("ShardMap " + mapNs + "/" + name);
  // A large map's pods and assignments are in its segments (read here one after another).
  StatusOr<nlohmann::json> whole = internalError("unanswered");
  sharding::completeShardMap(
      std::move(*object),
      [&api, &mapNs](const std::string& segment, std::function<void(StatusOr<std::string>)> got) {
        StatusOr<nlohmann::json> read =
            api.get(kube::resources::kShardMapSegments, mapNs, segment);
        got(read.ok() ? sharding::segmentData(*read) : StatusOr<std::string>(read.status()));
      },
      [&whole](StatusOr<nlohmann::json> done) { whole = std::move(done); });
  if (!whole.ok()) return whole.status().withContext("ShardMap " + mapNs + "/" + name);
  StatusOr<sharding::ShardMap> map = sharding::shardMapFromJson(*whole);
  if (!map.ok()) return map.status().withContext("ShardMap " + mapNs + "/" + name);
  return map;
}

// The ShardMap the arguments name; on failure, its error on stderr and nullopt.
std::optional<sharding::ShardMap> readNamed(const ClusterArgs& a, kube::Client& api,
                                            const std::string& defaultNamespace, CommandIo& io,
                                            std::string_view name) {
  StatusOr<sharding::ShardMap> map =
      readShardMap(api, a.ns.value_or(defaultNamespace), a.positional.front());
  if (map.ok()) return std::move(*map);
  io.err << "kshardctl " << name << ": " << map.status().toString() << "\n";
  return std::nullopt;
}

// Connects with the arguments' --kubeconfig (those after the first `leading` ones, which name a
// subcommand), then runs `withApi` on all of them.
int runConnected(std::span<const std::string> args, CommandIo& io, std::string_view name,
                 int (*withApi)(std::span<const std::string>, CommandIo&, kube::Client&,
                                const std::string&),
                 std::size_t leading = 0) {
  StatusOr<ClusterArgs> a = parseClusterArgs(args.subspan(leading));
  if (!a.ok()) return usageError(io, name, a.status().message());
  StatusOr<std::unique_ptr<KubeAccess>> access = connectToCluster(a->kubeconfig);
  if (!access.ok()) {
    io.err << "kshardctl " << name << ": " << access.status().message() << "\n";
    return kExitFailure;
  }
  return withApi(args, io, *(*access)->api, (*access)->defaultNamespace);
}

// What a command shows of a ShardMap (shard_map_view.h).
using MapView = StatusOr<std::string> (*)(const sharding::ShardMap&);

// Reads the one ShardMap the arguments name and prints `view` of it.
int printView(std::span<const std::string> args, CommandIo& io, kube::Client& api,
              const std::string& defaultNamespace, std::string_view name, MapView view) {
  StatusOr<ClusterArgs> a = parseClusterArgs(args);
  if (!a.ok()) return usageError(io, name, a.status().message());
  if (a->positional.size() > 1) return usageError(io, name, "one ShardMap at a time");
  const std::optional<sharding::ShardMap> map = readNamed(*a, api, defaultNamespace, io, name);
  if (!map) return kExitFailure;
  StatusOr<std::string> text = view(*map);
  if (!text.ok()) {
    io.err << "kshardctl " << name << ": " << text.status().toString() << "\n";
    return kExitFailure;
  }
  io.out << *text;
  return kExitOk;
}

// `top`'s subcommand, its first argument: its name in errors and its view of the map.
struct TopSubcommand {
  std::string name;
  MapView view;
};

StatusOr<TopSubcommand> topSubcommand(std::span<const std::string> args) {
  if (args.empty() || args.front().starts_with("-")) {
    return invalidArgument("name what to show first: top pods or top shards");
  }
  if (args.front() == "pods") return TopSubcommand{"top pods", &formatTopPods};
  if (args.front() == "shards") {
    return TopSubcommand{"top shards", [](const sharding::ShardMap& map) -> StatusOr<std::string> {
                           return formatTopShards(map);
                         }};
  }
  return invalidArgument("unknown subcommand \"" + args.front() + "\" (top pods or top shards)");
}

int runOwner(std::span<const std::string> args, CommandIo& io) {
  return runConnected(args, io, "owner", &runOwnerWith);
}

int runMap(std::span<const std::string> args, CommandIo& io) {
  return runConnected(args, io, "map", &runMapWith);
}

int runTop(std::span<const std::string> args, CommandIo& io) {
  StatusOr<TopSubcommand> sub = topSubcommand(args);
  if (!sub.ok()) return usageError(io, "top", sub.status().message());
  return runConnected(args, io, sub->name, &runTopWith, 1);
}

}  // namespace

int runOwnerWith(std::span<const std::string> args, CommandIo& io, kube::Client& api,
                 const std::string& defaultNamespace) {
  StatusOr<ClusterArgs> a = parseClusterArgs(args);
  if (!a.ok()) return usageError(io, "owner", a.status().message());
  if (a->positional.size() < 2) return usageError(io, "owner", "no entity ids given");
  const std::optional<sharding::ShardMap> map = readNamed(*a, api, defaultNamespace, io, "owner");
  if (!map) return kExitFailure;
  const std::vector<std::string> ids(a->positional.begin() + 1, a->positional.end());
  StatusOr<std::vector<OwnerRow>> rows = ownersOf(*map, ids);
  if (!rows.ok() && rows.status().code() == StatusCode::kInvalidArgument) {
    return usageError(io, "owner", rows.status().message());
  }
  if (!rows.ok()) {
    io.err << "kshardctl owner: " << rows.status().toString() << "\n";
    return kExitFailure;
  }
  io.out << formatOwners(*rows);
  return kExitOk;
}

int runMapWith(std::span<const std::string> args, CommandIo& io, kube::Client& api,
               const std::string& defaultNamespace) {
  return printView(args, io, api, defaultNamespace, "map", &formatMap);
}

int runTopWith(std::span<const std::string> args, CommandIo& io, kube::Client& api,
               const std::string& defaultNamespace) {
  StatusOr<TopSubcommand> sub = topSubcommand(args);
  if (!sub.ok()) return usageError(io, "top", sub.status().message());
  return printView(args.subspan(1), io, api, defaultNamespace, sub->name, sub->view);
}

const Command& ownerCommand() {
  static const Command command{"owner", "the shard and owning pod of entities, from the cluster",
                               kOwnerUsage, runOwner};
  return command;
}

const Command& mapCommand() {
  static const std::string usage = std::string(kMapUsage) + kViewOptions;
  static const Command command{"map", "a ShardMap's pods and their shards, as a table", usage,
                               runMap};
  return command;
}

const Command& topCommand() {
  static const std::string usage = std::string(kTopUsage) + kViewOptions;
  static const Command command{"top", "the measured load of a ShardMap's pods or hottest shards",
                               usage, runTop};
  return command;
}

}  // namespace kshard::tools
