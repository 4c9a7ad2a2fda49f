// datapath_stub_app: the app behind the data-path benchmark (bench/datapath/run.sh). It answers
// every entity message and stop callback at once with a small constant JSON body, on kshard's
// Beast server, so that the app costs as little as possible and the benchmark measures what sits
// in front of it (nothing, two nginx, two sidecars).
//
// It serves, all with 200 {"ok":true}:
//   POST /v1/entities/{type}/{id}            what the load generator sends (directly, via nginx)
//   POST /kshard/entities/{type}/{id}        what a sidecar sends for a message
//   POST /kshard/entities/{type}/{id}/stop   what a sidecar sends to stop an entity
//   POST /kshard/reset                       what a sidecar sends at its start
#include "base/logger.h"
#include "base/options.h"
#include "base/startup.h"
#include "http/factory.h"

namespace {

int run(int argc, char** argv) {
  using namespace kshard;
  std::int64_t port = 8080;
  std::int64_t threads = 2;
  OptionSet opts("datapath_stub_app",
                 "The fastest possible app for the sidecar data-path benchmark: every entity "
                 "message and stop callback gets 200 {\"ok\":true}.");
  opts.addInt("port", "", "Port on 127.0.0.1.", &port, 1, 65535);
  opts.addInt("threads", "", "I/O threads of the server.", &threads, 1, 64);
  if (auto exitCode = parseCommandLine(opts, argc, argv)) return *exitCode;
  Logger log("datapath-stub-app");
  StopSignals signals;

  http::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = static_cast<std::uint16_t>(port);
  options.threads = static_cast<int>(threads);
  options.logger = log;
  auto server = http::makeServer(http::Backend::kBeast, options);
  const auto ok = [](http::Request, http::Responder res) {
    res.send(http::Response::json(200, R"({"ok":true})"));
  };
  for (const char* pattern : {"/v1/entities/{type}/{id}", "/kshard/entities/{type}/{id}",
                              "/kshard/entities/{type}/{id}/stop", "/kshard/reset"}) {
    server->route(http::Method::kPost, pattern, ok);
  }
  if (Status st = server->start(); !st.ok()) {
    log.error("cannot start the server", {{"error", st.toString()}});
    return 1;
  }
  log.info("serving",
           {{"address", "127.0.0.1:" + std::to_string(server->port())}, {"threads", threads}});
  signals.wait();
  server->stop(std::chrono::seconds(1));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
