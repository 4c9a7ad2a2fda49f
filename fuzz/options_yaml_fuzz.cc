// The YAML file of --config (base/options.h), with kshard-sidecar's real option set
// (sidecar/config.h): a mapping of option names to scalars, under flags and the environment.
//
// Checks: no input throws or crashes; an error names the file; what is accepted respects each
// option's declared range (ports 1..65535, body and id limits, thread count, durations not
// negative); a config validate() accepts names a valid ShardMap and yields a registration body
// that encodes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "base/options.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "protocol/wire.h"
#include "sidecar/config.h"

namespace kshard::fuzz {
namespace {

// The config file: an in-memory file rewritten for each input, named through /proc.
std::string writeConfig(std::string_view text) {
  static const int fd = ::memfd_create("kshard-options-fuzz", MFD_CLOEXEC);
  check(fd >= 0, "memfd_create works");
  check(::ftruncate(fd, 0) == 0, "the config file can be emptied");
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    check(n > 0, "the config file can be written");
    done += static_cast<std::size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

int fuzzOneOptionsYaml(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string path = writeConfig(text);
  const std::string flag = "--config=" + path;
  const char* argv[] = {"kshard-sidecar", flag.c_str()};

  sidecar::SidecarConfig cfg;
  OptionSet opts("kshard-sidecar", "fuzz");
  cfg.declare(opts);
  const auto noEnvironment = [](const std::string&) { return std::optional<std::string>(); };
  const auto outcome = opts.parse(2, argv, noEnvironment);
  if (!outcome.ok()) {
    check(outcome.status().message().find(path) != std::string::npos,
          "an error names the config file", outcome.status().message());
    return 0;
  }
  check(*outcome == OptionSet::Outcome::kRun, "a config file cannot ask for --help");
  for (const std::int64_t port : {cfg.appPort, cfg.apiPort, cfg.peerPort, cfg.adminPort}) {
    check(port >= 1 && port <= 65535, "ports are in 1..65535", text);
  }
  check(cfg.maxBodyBytes >= 1024 && cfg.maxBodyBytes <= (1 << 30), "max-body-bytes in range", text);
  check(cfg.maxIdBytes >= 1 && cfg.maxIdBytes <= (1 << 20), "max-id-bytes in range", text);
  check(cfg.ioThreads >= 1 && cfg.ioThreads <= 64, "io-threads in range", text);
  for (const Duration d : {cfg.appTimeout, cfg.stopTimeout, cfg.appWaitTimeout, cfg.mapPollInterval}) {
    check(d >= Duration::zero(), "durations are not negative", text);
  }
  if (!cfg.validate().ok()) return 0;
  check(!cfg.podName.empty() && !cfg.shardMap.empty(), "a valid config names the pod and map",
        text);
  // What the sidecar announces must be sendable: its registration is encoded from these fields.
  const sidecar::Identity self = cfg.identity();
  check(protocol::parseShardMapRef(self.shardMap.toString()).ok(),
        "a valid config names a valid ShardMap", text);
  try {
    const std::string body =
        protocol::encode(protocol::RegisterRequest{self.pod, self.uid, self.peerAddress, self.version, self.incarnation});
    check(!body.empty(), "the registration encodes");
  } catch (const std::exception& e) {
    fail("a valid config gives a registration that encodes", std::string(e.what()) + " / " +
                                                                 std::string(text));
  }
  return 0;
}

}  // namespace kshard::fuzz
