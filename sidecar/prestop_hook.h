// PreStopHook: the app container's own preStop hook, which the injector moved to the sidecar so
// that the drain can take its place (operator/sidecar_injector.h): the sidecar runs it once the
// drain is over, and only then answers the kubelet's hook, so the app still sees its hook run
// before its SIGTERM.
//
// Two kinds, as Kubernetes writes them (KSHARD_APP_PRESTOP, JSON):
//   {"httpGet": {"path", "port", "host", "scheme", "httpHeaders": [{"name","value"}]}}
//       GET to the pod's IP (or `host`) and port; any answer counts as done, as for the kubelet;
//   {"sleep": {"seconds": N}}
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/scheduler.h"
#include "base/status.h"
#include "http/client.h"

namespace kshard::sidecar {

class PreStopHook {
 public:
  struct Get {
    std::string host;  // empty: the pod's IP
    std::int64_t port = 0;
    std::string path = "/";
    bool https = false;
    std::vector<std::pair<std::string, std::string>> headers;
  };

  // InvalidArgument naming the field when `json` is not a hook of one of the two kinds.
  [[nodiscard]] static StatusOr<PreStopHook> parse(std::string_view json);

  // Runs the hook and calls `done` when it is over (a failed GET is logged by the caller; the
  // kubelet, too, goes on with the container's stop). `podIp` is the default host. Not
  // thread-safe; the hook must outlive the run (its HTTP client lives in it).
  void run(const std::string& podIp, Scheduler& scheduler, Duration timeout,
           std::function<void(Status)> done);

  const std::optional<Get>& get() const { return get_; }
  Duration sleep() const { return sleep_; }

 private:
  std::optional<Get> get_;
  Duration sleep_{};
  std::shared_ptr<http::Client> client_;  // made by the first run
};

}  // namespace kshard::sidecar
