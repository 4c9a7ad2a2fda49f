#include "tools/shard_of_command.h"

#include <charconv>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sharding/shard_id.h"

namespace kshard::tools {
namespace {

constexpr char kName[] = "shard-of";

constexpr char kUsage[] = R"(Usage: kshardctl shard-of --shards N ID...

Prints the shard (1..N) of each entity id, one per line, in the order given:
abs(h % N) + 1 with h = Java's String.hashCode of the id over its UTF-16 code units
(the formula of Shardcake and Akka Cluster Sharding). Ids are taken as UTF-8; an id that
is not valid UTF-8 is an error and nothing is printed.

Options:
  --shards N, --shards=N   the number of shards, 1..100000 (the ShardMap's spec.shards)
  --                       every later argument is an id, even one starting with '-'
  -h, --help               show this help

Example:
  kshardctl shard-of --shards 300 a guild1     prints 98 and 95
)";

bool parseShardCount(std::string_view text, std::int32_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && out >= sharding::kMinShardCount &&
         out <= sharding::kMaxShardCount;
}

int run(std::span<const std::string> args, CommandIo& io) {
  std::optional<std::int32_t> shardCount;
  std::vector<std::string_view> ids;
  bool onlyIds = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (onlyIds || a.empty() || a[0] != '-') {
      ids.push_back(a);
      continue;
    }
    if (a == "--") {
      onlyIds = true;
      continue;
    }
    std::string_view value;
    if (a == "--shards") {
      if (i + 1 == args.size()) return usageError(io, kName, "--shards needs a value");
      value = args[++i];
    } else if (a.rfind("--shards=", 0) == 0) {
      value = std::string_view(a).substr(9);
    } else {
      return usageError(io, kName,
                        "unknown option \"" + a + "\" (ids starting with '-' go after --)");
    }
    std::int32_t n = 0;
    if (!parseShardCount(value, n)) {
      return usageError(
          io, kName,
          "--shards must be an integer in 1..100000, not \"" + std::string(value) + "\"");
    }
    shardCount = n;
  }
  if (!shardCount) return usageError(io, kName, "--shards N is required");
  if (ids.empty()) return usageError(io, kName, "no entity ids given");
  // Compute every shard before printing, so a bad id yields an error and no partial output.
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    StatusOr<std::int32_t> hash = sharding::javaStringHashCode(ids[i]);
    if (!hash.ok()) {
      return usageError(io, kName, "id " + std::to_string(i + 1) + ": " + hash.status().message());
    }
    out += std::to_string(sharding::shardIdOfHash(*hash, *shardCount));
    out += '\n';
  }
  io.out << out;
  return kExitOk;
}

}  // namespace

const Command& shardOfCommand() {
  static const Command command{kName, "print the shard of entity ids", kUsage, run};
  return command;
}

}  // namespace kshard::tools
