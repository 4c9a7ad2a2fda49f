// kshard-operator: the Shard Manager. Watches ShardMaps and the pods labelled for them, elects one
// leader among its replicas with a Lease, and on the leader runs the rebalance workflow and the
// manager API. See docs/operator.md; the parts and their life are in operator/operator_server.h.
#include <malloc.h>

#include <cstdio>

#include "base/startup.h"
#include "http/factory.h"
#include "kube/config.h"
#include "operator/config.h"
#include "operator/operator_server.h"

namespace kshard::manager {
namespace {

constexpr char kUserAgent[] = "kshard-operator/" KSHARD_VERSION;

// Waits for a stop signal; meanwhile gives the heap's free pages back every few seconds. Bursts
// of large JSON documents (a status of 1,000 pods, a thousand registrations at once) leave free
// memory scattered in the arenas, where it counts as resident until trimmed.
int waitTrimming(StopSignals& signals) {
  for (;;) {
    if (auto sig = signals.waitFor(std::chrono::seconds(5))) return *sig;
    malloc_trim(0);
  }
}

int run(int argc, char** argv) {
  OperatorConfig cfg;
  OptionSet opts("kshard-operator",
                 "The Shard Manager of kshard: assigns the shards of every ShardMap to its pods.");
  cfg.declare(opts);
  if (auto exit = parseCommandLine(opts, argc, argv, [&] { return cfg.finalize(); })) {
    return *exit;
  }
  const Logger log = loggerAtLevel("operator", cfg.logLevel).withFields({{"replica", cfg.podName}});
  // Before any thread starts: every thread inherits the blocked signals.
  StopSignals signals;

  auto kubeConfig = kube::loadConfig({cfg.kubeconfig, cfg.kubeContext}, SystemClock::instance());
  if (!kubeConfig.ok()) {
    log.error("cannot load the Kubernetes configuration",
              {{"error", kubeConfig.status().toString()}});
    return kExitFailure;
  }
  log.info("kubernetes configuration", {{"source", kubeConfig->source}});
  auto transport =
      http::makeClient(http::Backend::kCppRest, kube::httpClientOptions(*kubeConfig, kUserAgent));
  if (!transport.ok()) {
    log.error("cannot create the Kubernetes client", {{"error", transport.status().toString()}});
    return kExitFailure;
  }
  auto server =
      OperatorServer::build(cfg, log, {**transport, kubeConfig->token, kubeConfig->pathPrefix});
  if (!server.ok()) {
    return server.status().code() == StatusCode::kInvalidArgument ? kExitConfig : kExitFailure;
  }
  if (!(*server)->start().ok()) return kExitFailure;
  // Only with a synced cache may this replica lead: takeover reads pod health from it.
  while (!(*server)->synced()) {
    if (signals.waitFor(std::chrono::seconds(1))) return kExitOk;
  }
  if (!(*server)->joinElection().ok()) return kExitFailure;

  const int sig = waitTrimming(signals);
  log.info("stopping", {{"signal", sig}});
  (*server)->drain();
  (*server)->stop();
  return kExitOk;
}

}  // namespace
}  // namespace kshard::manager

int main(int argc, char** argv) {
  // glibc gives each thread that allocates its own arena, up to 8 per core, and freed memory
  // stays in the arena that held it. The operator's threads (HTTP, informers, pod clients) take
  // turns building large JSON documents (a ShardMap status of 1,000 pods is 200 KiB of text), so
  // the peak resident set was the sum of those arenas: 90 MiB with 1,000 pods against 58 MiB
  // with one arena (bench/operator, docs/benchmarks.md). Nothing here is allocation-bound.
  mallopt(M_ARENA_MAX, 2);
  try {
    return kshard::manager::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kshard-operator: fatal: %s\n", e.what());
    return 1;
  }
}
