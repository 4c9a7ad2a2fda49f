// kshard-counter: the example app of the quickstart and the end-to-end tests. See
// examples/counter/counter_app.h and `kshard-counter --help`.
#include <sys/stat.h>

#include <optional>

#include "base/options.h"
#include "base/startup.h"
#include "examples/counter/counter_app.h"
#include "http/factory.h"

namespace kshard::examples {
namespace {

struct CounterOptions {
  std::int64_t appPort = 8080;
  std::int64_t publicPort = 8081;
  std::int64_t sidecarPort = 7100;
  std::string pod = "counter";
  std::string stateDir = "/tmp/kshard-counter-state";
  std::string eventLog;
  std::int64_t shutdownGraceSeconds = 15;
};

// Reads the flags and environment into `o`; the exit code when the program ends here (--help, or
// an option that is not valid).
std::optional<int> parseOptions(int argc, char** argv, CounterOptions& o) {
  OptionSet opts("kshard-counter",
                 "kshard's example app: counters as entities, reached through the kshard sidecar.");
  opts.addInt("app-port", "KSHARD_APP_PORT", "Port of the entity callbacks on 127.0.0.1.",
              &o.appPort, 1, 65535);
  opts.addInt("public-port", "COUNTER_PUBLIC_PORT", "Port of the public API on all addresses.",
              &o.publicPort, 1, 65535);
  opts.addInt("sidecar-port", "KSHARD_API_PORT", "Port of the sidecar's app API on 127.0.0.1.",
              &o.sidecarPort, 1, 65535);
  opts.addString("pod", "POD_NAME", "This pod's name, written into events.", &o.pod);
  opts.addString("state-dir", "COUNTER_STATE_DIR",
                 "Directory shared by all pods for counter state.", &o.stateDir);
  opts.addString("event-log", "COUNTER_EVENT_LOG",
                 "Shared JSON-lines file of activations and stops.", &o.eventLog);
  opts.addInt("shutdown-grace-seconds", "COUNTER_SHUTDOWN_GRACE_SECONDS",
              "After SIGTERM, how long requests in flight may still finish. Longer than the "
              "ShardMap's sendTimeout: a request the sidecar is still routing gets its answer.",
              &o.shutdownGraceSeconds, 0, 3600);
  return parseCommandLine(opts, argc, argv);
}

StatusOr<std::unique_ptr<http::Client>> sidecarClient(std::int64_t sidecarPort) {
  http::ClientOptions sidecarOptions;
  sidecarOptions.baseUrl = "http://127.0.0.1:" + std::to_string(sidecarPort);
  sidecarOptions.requestTimeout = std::chrono::seconds(60);
  return http::makeClient(http::Backend::kBeast, sidecarOptions);
}

// The app's servers, not started yet: the entity callbacks on 127.0.0.1, for the sidecar, and
// the public API on all addresses. The public one is stopped (and destroyed) first.
struct CounterServers {
  std::unique_ptr<http::Server> entity;
  std::unique_ptr<http::Server> publicApi;
};

CounterServers makeServers(CounterApp& app, const CounterOptions& o) {
  http::ServerOptions entityOptions;
  entityOptions.host = "127.0.0.1";
  entityOptions.port = static_cast<std::uint16_t>(o.appPort);
  auto entityServer = http::makeServer(http::Backend::kBeast, entityOptions);
  app.addEntityRoutes(*entityServer);
  http::ServerOptions publicOptions;
  publicOptions.host = "0.0.0.0";
  publicOptions.port = static_cast<std::uint16_t>(o.publicPort);
  auto publicServer = http::makeServer(http::Backend::kBeast, publicOptions);
  app.addPublicRoutes(*publicServer);
  return {std::move(entityServer), std::move(publicServer)};
}

int run(int argc, char** argv) {
  CounterOptions o;
  if (auto exitCode = parseOptions(argc, argv, o)) return *exitCode;
  ::mkdir(o.stateDir.c_str(), 0755);
  Logger log = Logger("counter").withFields({{"pod", o.pod}});
  StopSignals signals;

  auto sidecar = sidecarClient(o.sidecarPort);
  if (!sidecar.ok()) {
    log.error("cannot create the sidecar client", {{"error", sidecar.status().toString()}});
    return 1;
  }
  CounterStore store(o.stateDir);
  CounterApp app(store, **sidecar, SystemClock::instance(), {o.pod, o.eventLog}, log);
  CounterServers servers = makeServers(app, o);
  for (auto* s : {servers.entity.get(), servers.publicApi.get()}) {
    if (Status st = s->start(); !st.ok()) {
      log.error("cannot start a server", {{"error", st.toString()}});
      return 1;
    }
  }
  log.info("serving", {{"entities", "127.0.0.1:" + std::to_string(o.appPort)},
                       {"public", "0.0.0.0:" + std::to_string(o.publicPort)}});
  const int sig = signals.wait();
  // The sidecar stopped every counter during its drain (the preStop hook) before this signal, but a
  // public request that arrived just before may still wait in the sidecar for its shard's new
  // owner: new connections are refused now, and requests in flight get their answers (the sidecar
  // stops only after this container, so it is still there to route them).
  log.info("stopping", {{"signal", sig},
                        {"active_counters", static_cast<std::uint64_t>(app.activeCounters())}});
  const std::chrono::seconds grace(o.shutdownGraceSeconds);
  servers.publicApi->stop(grace);
  servers.entity->stop(grace);
  log.info("stopped");
  return 0;
}

}  // namespace
}  // namespace kshard::examples

int main(int argc, char** argv) { return kshard::examples::run(argc, argv); }
