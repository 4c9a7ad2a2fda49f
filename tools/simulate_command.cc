#include "tools/simulate_command.h"

#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <vector>

#include "base/options.h"
#include "sharding/duration.h"
#include "tools/simulate_load_command.h"
#include "tools/simulate_options.h"
#include "tools/simulate_report.h"
#include "tools/simulate_run.h"

namespace kshard::tools {
namespace {

constexpr char kName[] = "simulate";

constexpr char kUsage[] = R"(Usage: kshardctl simulate [options]

Simulates shard rebalancing on Kubernetes, on a simulated clock (no I/O, no sleeping), and
prints for every size x scenario x strategy how many shards moved, how long it took and how
uneven the pods were. Same options, same output: all randomness comes from --seed.

Strategies (--strategies):
  kshard        kshard's planner (sharding/planner.h, as is) and rebalance workflow: immediate
                rounds on the first register, on a register while shards are unassigned, on
                unregister and on a death; periodic rounds every --rebalance-interval, capped
                by --rebalance-rate; one round at a time, a round with moves takes --handoff.
                Unregister hold: a drained pod deleted at d may not unregister (it asks again
                every 1 s, keeping and serving its shards) while a pod of a newer version is
                starting and not registered yet, until d + --max-unregister-hold.
  akka-classic  Akka's LeastShardAllocationStrategy as documented up to 2.6.9: allocate to
                the region with fewest shards; every --akka-rebalance-interval, if most - least
                > --akka-rebalance-threshold, hand off min(diff - threshold, threshold,
                --akka-max-simultaneous-rebalance - in progress) shards. No version awareness.
  akka          Akka 2.6.10+ leastShardAllocationStrategy(--akka-absolute-limit,
                --akka-relative-limit): regions ranked not leaving, newest app version, fewest
                shards; no rebalance during a rolling update (mixed versions), while a member
                is unreachable or while a handoff is in progress; at most
                max(1, min(relative x shards, absolute)) shards per round.
  ring          consistent hashing as Dapr's placement: --virtual-nodes points per pod at
                hash(address#i); a shard goes to the first point at or after hash(shard id).
                Hash: FNV-1a 64 + MurmurHash3 fmix64. A new pod has a new address.

Scenarios (--scenarios), N = the pods of a size:
  scale-up        N -> 2N pods              scale-down   2N -> N pods (the newest N go)
  rolling-update  N pods 1.0.0 -> 2.0.0     crash        k of N pods crash (--crash), the
                  (--max-surge,                          ReplicaSet replaces them when their
                  --max-unavailable)                     death is noticed (--detect)

Pods (Kubernetes Deployment, as kube-controller-manager): a created pod is ready and registers
after --start-delay. A deleted pod is terminating: it takes no new shards, drains and leaves
(unregisters; Akka: its handoff completes; ring: it leaves the ring) after --drain; kshard's
operator may hold the unregister longer (above). Shards of a pod that left or died are placed
at once by each strategy's own rule. Rolling update: the new ReplicaSet grows while pods < N +
maxSurge; old pods go while ready pods stay >= N - maxUnavailable (maxSurge rounds up,
maxUnavailable down); terminating pods count for nothing.

Counting: a move is a shard getting a new owner when it had one before (directly, or when a
shard left unassigned by a departed pod is placed); a placement is a shard's first owner
(never in these scenarios: they start balanced). A round is one decision that changed
ownership. Imbalance is max - min shards over serving pods (ready, not terminating, not
crashed). "settled after" is the simulated time of the last change, from the scenario's start;
a run stops once the pods are stable and the strategy's own check finds nothing to do.

Options:
  --sizes LIST              SHARDSxPODS,... shards 1..100000, pods (N) 1..10000 (default 300x3)
  --scenarios LIST          default scale-up,scale-down,rolling-update,crash
  --strategies LIST         default kshard,akka-classic,akka,ring
  --crash K|P%              pods that crash, at least 1 (default 10%, rounded down)
  --seed N                  picks the crashed pods and seeds kshard's planner (default 0)
  --format table|csv        table: Markdown (default); csv: one header line, one line per run
  --quiet                   no progress lines on stderr
  --rebalance-interval D    kshard's periodic round (default 20s, the ShardMap default)
  --rebalance-retry-interval D  kshard's retry after a failed move (default 10s)
  --rebalance-rate R        kshard: one pod receives at most R x shards per periodic round,
                            in (0, 1] (default 0.02)
  --akka-rebalance-interval D        (default 10s, Akka's default)
  --akka-rebalance-threshold N       akka-classic, >= 1 (default 1)
  --akka-max-simultaneous-rebalance N  akka-classic, >= 1 (default 3)
  --akka-absolute-limit N            akka, >= 1 (default 20)
  --akka-relative-limit R            akka, in (0, 1] (default 0.1)
  --virtual-nodes N         ring points per pod, 1..1000 (default 100, Dapr's default)
  --max-surge K|P%          rolling update (default 25%)
  --max-unavailable K|P%    rolling update (default 25%); not 0 when --max-surge is 0
  --start-delay D           pod created -> ready and registered (default 10s)
  --drain D                 pod deleted -> unregistered, its shards released (default 5s)
  --handoff D               kshard: duration of a round that moves shards; Akka: duration of
                            a rebalance handoff (default 1s)
  --detect D                pod crashed -> its death noticed (default 0s)
  --max-unregister-hold D   kshard: the longest a terminating pod's unregister is held, from
                            its deletion (default 60s, the operator's; 0 = no hold). The
                            operator's cap by the deletion deadline is not modelled.
  --max-time D              give up a run after this much simulated time (default 720h)
  --config FILE             read options from a YAML file (keys: option names without --)
  -h, --help                show this help
Durations (D) are Kubernetes durations: 500ms, 20s, 1m30s, 720h.

Workload mode (--workload): fixed pods, a skewed load; how evenly each strategy spreads it.
Entities "entity-1".."entity-N" land on shards by kshard's shard function; the entity of Zipf
rank r costs 1/r^s (ranks drawn from --seed). Workloads: zipf:S (fixed ranks), hotspot:S (ranks
drawn anew every --hotspot-period), diurnal:S (half the entities peak at noon, half at midnight,
by --diurnal-swing over --diurnal-period). Strategies: count (kshard's count planner), load
(kshard's load planner, sharding/load_planner.h, every --rebalance-interval on loads measured
as a decayed average of half-life --measure-half-life), akka (LeastShardAllocationStrategy),
ring. Reported per strategy: the pods' peak-to-mean load (median and max of one sample a
round), the hottest shard's bound (the lowest peak-to-mean any placement reaches), moves per
minute, and for hotspot the worst number of rounds until peak-to-mean is back within
max(1 + tolerance, bound) after the hot spot moved ("never": not before it moved again).
  --workload KIND[:S]       zipf, hotspot or diurnal; S in [0, 5] (default 1.0)
  --shards N                default 1000
  --pods N                  default 20
  --entities N              1..10000000 (default 100000)
  --strategies LIST         default count,load,akka,ring
  --duration D              simulated time (default 1h)
  --rebalance-interval D    a round every D (default 20s)
  --rebalance-rate R        the moves of a round, at most R x shards (default 0.02)
  --tolerance T             load: a pod is overloaded above (1 + T) x mean, in (0, 10]
                            (default 0.1)
  --cooldown-rounds N       load: rounds a moved shard stays put (default 3)
  --measure-half-life D     default 1m
  --hotspot-period D        default 10m
  --diurnal-period D        default 1h
  --diurnal-swing W         in [0, 1) (default 0.8)
  --virtual-nodes N         ring points per pod, 1..1000 (default 100)
  --seed N                  draws the ranks (default 0)
  --format table|json       table: Markdown (default); json: an array, one object a strategy
  --quiet                   no progress lines on stderr

Exit status: 0 on success; 2 on bad options, with one line on stderr naming the problem.

Examples:
  kshardctl simulate
  kshardctl simulate --sizes 10000x1000 --scenarios rolling-update --format csv
  kshardctl simulate --workload zipf:1.0 --shards 1000 --pods 20 --entities 100000 --format json
)";

constexpr std::array<Scenario, 4> kAllScenarios{Scenario::kScaleUp, Scenario::kScaleDown,
                                                Scenario::kRollingUpdate, Scenario::kCrash};
constexpr std::array<Strategy, 4> kAllStrategies{Strategy::kKshard, Strategy::kAkkaClassic,
                                                 Strategy::kAkka, Strategy::kRing};

struct Size {
  std::int32_t shards = 0;
  std::int32_t pods = 0;
};

struct SimulateOptions {
  std::vector<Size> sizes{{300, 3}};
  std::vector<Scenario> scenarios{kAllScenarios.begin(), kAllScenarios.end()};
  std::vector<Strategy> strategies{kAllStrategies.begin(), kAllStrategies.end()};
  SimulationConfig config;
  bool csv = false;
  bool quiet = false;
};

OptionSet::Setter intOrPercent(IntOrPercent* target, std::int32_t minCount) {
  return [=](std::string_view v) {
    IntOrPercent parsed;
    parsed.percent = !v.empty() && v.back() == '%';
    const std::string_view number = parsed.percent ? v.substr(0, v.size() - 1) : v;
    const std::int32_t max = parsed.percent ? 100 : std::numeric_limits<std::int32_t>::max();
    if (!parseInteger(number, parsed.value) || parsed.value < (parsed.percent ? 0 : minCount) ||
        parsed.value > max) {
      return invalidArgument("must be a count >= " + std::to_string(minCount) +
                             " or a percentage 0%..100%, not \"" + std::string(v) + "\"");
    }
    *target = parsed;
    return Status{};
  };
}

OptionSet::Setter sizeList(std::vector<Size>* target) {
  return [=](std::string_view v) {
    std::vector<Size> parsed;
    for (std::string_view part : splitList(v)) {
      const std::size_t x = part.find('x');
      Size size;
      if (x == std::string_view::npos || !parseInteger(part.substr(0, x), size.shards) ||
          !parseInteger(part.substr(x + 1), size.pods) || size.shards < 1 ||
          size.shards > sharding::kMaxShardCount || size.pods < 1 ||
          size.pods > kMaxSimulatedPods) {
        return invalidArgument("\"" + std::string(part) +
                               "\" is not SHARDSxPODS with shards in 1..100000 and pods in "
                               "1..10000");
      }
      parsed.push_back(size);
    }
    *target = std::move(parsed);
    return Status{};
  };
}

StatusOr<SimulateOptions> parseOptions(std::span<const std::string> args) {
  SimulateOptions o;
  SimulationConfig& c = o.config;
  std::string format = "table";
  OptionSet set("kshardctl simulate", "");
  set.add("sizes", "", "", "", sizeList(&o.sizes));
  set.add("scenarios", "", "", "",
          nameList(&o.scenarios, &parseScenario, "scale-up, scale-down, rolling-update, crash"));
  set.add("strategies", "", "", "",
          nameList(&o.strategies, &parseStrategy, "kshard, akka-classic, akka, ring"));
  set.add("crash", "", "", "", intOrPercent(&c.crashed, 1));
  set.add("seed", "", "", "",
          integer<std::uint64_t>(&c.seed, 0, std::numeric_limits<std::uint64_t>::max()));
  set.addString("format", "", "", &format);
  set.addBool("quiet", "", "", &o.quiet);
  set.add("rebalance-interval", "", "", "", duration(&c.kshard.rebalanceInterval, true));
  set.add("rebalance-retry-interval", "", "", "", duration(&c.kshard.rebalanceRetryInterval, true));
  set.add("rebalance-rate", "", "", "", fraction(&c.kshard.rebalanceRate));
  set.add("akka-rebalance-interval", "", "", "", duration(&c.akka.rebalanceInterval, true));
  set.add("akka-rebalance-threshold", "", "", "",
          integer<std::int32_t>(&c.akka.rebalanceThreshold, 1, 1000000));
  set.add("akka-max-simultaneous-rebalance", "", "", "",
          integer<std::int32_t>(&c.akka.maxSimultaneousRebalance, 1, 1000000));
  set.add("akka-absolute-limit", "", "", "",
          integer<std::int32_t>(&c.akka.absoluteLimit, 1, 1000000));
  set.add("akka-relative-limit", "", "", "", fraction(&c.akka.relativeLimit));
  set.add("virtual-nodes", "", "", "", integer<std::int32_t>(&c.virtualNodes, 1, 1000));
  set.add("max-surge", "", "", "", intOrPercent(&c.rolling.maxSurge, 0));
  set.add("max-unavailable", "", "", "", intOrPercent(&c.rolling.maxUnavailable, 0));
  set.add("start-delay", "", "", "", duration(&c.timing.startDelay, false));
  set.add("drain", "", "", "", duration(&c.timing.drain, false));
  set.add("handoff", "", "", "", duration(&c.kshard.roundTime, false));
  set.add("detect", "", "", "", duration(&c.timing.detect, false));
  set.add("max-unregister-hold", "", "", "", duration(&c.kshard.maxUnregisterHold, false));
  set.add("max-time", "", "", "", duration(&c.maxTime, true));

  if (Status s = parseArguments(set, args); !s.ok()) return s;
  if (format != "table" && format != "csv") {
    return invalidArgument("--format: must be table or csv, not \"" + format + "\"");
  }
  o.csv = format == "csv";
  c.akka.handoffTime = c.kshard.roundTime;
  // Kubernetes rejects this too: the rollout could never make progress.
  if (c.rolling.maxSurge.value == 0 && c.rolling.maxUnavailable.value == 0) {
    return invalidArgument("--max-unavailable: may not be 0 when --max-surge is 0");
  }
  for (const Size& size : o.sizes) {
    SimulationConfig check = c;
    check.shards = size.shards;
    check.pods = size.pods;
    for (Scenario scenario : o.scenarios) {
      check.scenario = scenario;
      if (Status s = validateConfig(check); !s.ok()) {
        return invalidArgument("--crash: " + s.message() + " (size " + std::to_string(size.shards) +
                               "x" + std::to_string(size.pods) + ")");
      }
    }
  }
  return o;
}

// Progress on stderr: a line when a run ends, and every few seconds of wall time during a long
// one.
class ProgressLines {
 public:
  ProgressLines(const Clock& clock, std::ostream& err, bool quiet, std::size_t runs)
      : clock_(clock), err_(err), quiet_(quiet), runs_(runs) {}

  void begin(const SimulationConfig& c) {
    ++run_;
    label_ = "kshardctl simulate: [" + std::to_string(run_) + "/" + std::to_string(runs_) + "] " +
             std::to_string(c.shards) + "x" + std::to_string(c.pods) + " " +
             std::string(scenarioName(c.scenario)) + " " + std::string(strategyName(c.strategy));
    started_ = clock_.now();
    lastLine_ = started_;
  }

  void during(SimTime simulated, std::int64_t moves) {
    if (quiet_ || clock_.now() - lastLine_ < std::chrono::seconds(2)) return;
    lastLine_ = clock_.now();
    err_ << label_ << ": simulated " << sharding::formatDuration(roundedToSeconds(simulated))
         << ", " << moves << " moves so far\n";
  }

  void end(const SimulationResult& r) {
    if (quiet_) return;
    const double wall = std::chrono::duration<double>(clock_.now() - started_).count();
    std::ostringstream line;
    line.precision(2);
    line << std::fixed << label_ << ": " << r.moves << " moves, "
         << (r.settled ? "settled after " : "not settled after ")
         << sharding::formatDuration(r.settleTime) << " simulated, " << wall << " s wall\n";
    err_ << line.str();
  }

 private:
  static SimTime roundedToSeconds(SimTime t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t);
  }

  const Clock& clock_;
  std::ostream& err_;
  bool quiet_;
  std::size_t runs_;
  std::size_t run_ = 0;
  std::string label_;
  SteadyTime started_;
  SteadyTime lastLine_;
};

int run(std::span<const std::string> args, CommandIo& io) {
  return runSimulate(args, io, SystemClock::instance());
}

}  // namespace

int runSimulate(std::span<const std::string> args, CommandIo& io, const Clock& wallClock) {
  if (wantsWorkload(args)) return runLoadSimulate(args, io);
  StatusOr<SimulateOptions> options = parseOptions(args);
  if (!options.ok()) return usageError(io, kName, options.status().message());
  const SimulateOptions& o = *options;
  ProgressLines progress(wallClock, io.err, o.quiet,
                         o.sizes.size() * o.scenarios.size() * o.strategies.size());
  std::vector<SimulationResult> results;
  for (const Size& size : o.sizes) {
    for (Scenario scenario : o.scenarios) {
      for (Strategy strategy : o.strategies) {
        SimulationConfig config = o.config;
        config.shards = size.shards;
        config.pods = size.pods;
        config.scenario = scenario;
        config.strategy = strategy;
        progress.begin(config);
        StatusOr<SimulationResult> result =
            simulate(config, [&](SimTime now, std::int64_t moves) { progress.during(now, moves); });
        if (!result.ok()) {
          io.err << "kshardctl simulate: internal error: " << result.status().message() << "\n";
          return kExitFailure;
        }
        progress.end(*result);
        results.push_back(*result);
      }
    }
  }
  io.out << (o.csv ? formatCsv(results) : formatTable(results));
  return kExitOk;
}

const Command& simulateCommand() {
  static const Command command{
      kName, "simulate rebalancing: kshard, Akka and a hash ring through scale and rollouts",
      kUsage, run};
  return command;
}

}  // namespace kshard::tools
