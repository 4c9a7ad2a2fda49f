// kshard-counter: the example app of the quickstart and the end-to-end tests. See
// examples/counter/counter_app.h and `kshard-counter --help`.
#include <signal.h>
#include <sys/stat.h>

#include <iostream>

#include "base/options.h"
#include "examples/counter/counter_app.h"
#include "http/factory.h"

namespace {

int run(int argc, char** argv) {
  using namespace kshard;
  std::int64_t appPort = 8080;
  std::int64_t publicPort = 8081;
  std::int64_t sidecarPort = 7100;
  std::string pod = "counter";
  std::string stateDir = "/tmp/kshard-counter-state";
  std::string eventLog;
  std::int64_t shutdownGraceSeconds = 15;
  OptionSet opts("kshard-counter",
                 "kshard's example app: counters as entities, reached through the kshard sidecar.");
  opts.addInt("app-port", "KSHARD_APP_PORT", "Port of the entity callbacks on 127.0.0.1.", &appPort,
              1, 65535);
  opts.addInt("public-port", "COUNTER_PUBLIC_PORT", "Port of the public API on all addresses.",
              &publicPort, 1, 65535);
  opts.addInt("sidecar-port", "KSHARD_API_PORT", "Port of the sidecar's app API on 127.0.0.1.",
              &sidecarPort, 1, 65535);
  opts.addString("pod", "POD_NAME", "This pod's name, written into events.", &pod);
  opts.addString("state-dir", "COUNTER_STATE_DIR", "Directory shared by all pods for counter state.",
                 &stateDir);
  opts.addString("event-log", "COUNTER_EVENT_LOG", "Shared JSON-lines file of activations and stops.",
                 &eventLog);
  opts.addInt("shutdown-grace-seconds", "COUNTER_SHUTDOWN_GRACE_SECONDS",
              "After SIGTERM, how long requests in flight may still finish. Longer than the "
              "ShardMap's sendTimeout: a request the sidecar is still routing gets its answer.",
              &shutdownGraceSeconds, 0, 3600);
  auto parsed = opts.parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "kshard-counter: " << parsed.status().message() << "\n";
    return 2;
  }
  if (*parsed == OptionSet::Outcome::kHelp) {
    std::cout << opts.usage();
    return 0;
  }
  ::mkdir(stateDir.c_str(), 0755);
  Logger log = Logger("counter").withFields({{"pod", pod}});

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  http::ClientOptions sidecarOptions;
  sidecarOptions.baseUrl = "http://127.0.0.1:" + std::to_string(sidecarPort);
  sidecarOptions.requestTimeout = std::chrono::seconds(60);
  auto sidecar = http::makeClient(http::Backend::kBeast, sidecarOptions);
  if (!sidecar.ok()) {
    log.error("cannot create the sidecar client", {{"error", sidecar.status().toString()}});
    return 1;
  }
  examples::CounterStore store(stateDir);
  examples::CounterApp app(store, **sidecar, SystemClock::instance(), {pod, eventLog}, log);

  http::ServerOptions entityOptions;
  entityOptions.host = "127.0.0.1";
  entityOptions.port = static_cast<std::uint16_t>(appPort);
  auto entityServer = http::makeServer(http::Backend::kBeast, entityOptions);
  app.addEntityRoutes(*entityServer);
  http::ServerOptions publicOptions;
  publicOptions.host = "0.0.0.0";
  publicOptions.port = static_cast<std::uint16_t>(publicPort);
  auto publicServer = http::makeServer(http::Backend::kBeast, publicOptions);
  app.addPublicRoutes(*publicServer);
  for (auto* s : {entityServer.get(), publicServer.get()}) {
    if (Status st = s->start(); !st.ok()) {
      log.error("cannot start a server", {{"error", st.toString()}});
      return 1;
    }
  }
  log.info("serving", {{"entities", "127.0.0.1:" + std::to_string(appPort)},
                       {"public", "0.0.0.0:" + std::to_string(publicPort)}});
  int sig = 0;
  sigwait(&signals, &sig);
  // The sidecar stopped every counter during its drain (the preStop hook) before this signal, but a
  // public request that arrived just before may still wait in the sidecar for its shard's new
  // owner: new connections are refused now, and requests in flight get their answers (the sidecar
  // stops only after this container, so it is still there to route them).
  log.info("stopping", {{"signal", sig}, {"active_counters", static_cast<std::uint64_t>(app.activeCounters())}});
  const std::chrono::seconds grace(shutdownGraceSeconds);
  publicServer->stop(grace);
  entityServer->stop(grace);
  log.info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
