// Doctor checks: whether a kshard installation is healthy, judged from what the API shows. Pure
// functions of the objects read (the I/O is in doctor_command.cc), so each rule is unit-tested.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"

namespace kshard::tools {

struct CheckResult {
  std::string name;
  bool ok = false;
  std::string detail;  // what was seen, or what is wrong and what to do
};

// The CRD `name` (from `file` in the repository) exists and is Established. `crd` is nullopt
// when it was not found.
CheckResult checkCrd(const std::optional<nlohmann::json>& crd,
                     std::string_view name = "shardmaps.kshard.io",
                     std::string_view file = "crds/shardmap.yaml");
// At least one operator pod is Ready. `pods` is a PodList's items.
CheckResult checkOperatorPods(const std::vector<nlohmann::json>& pods);
// A holder has the Lease and renewed it within its duration (as seen at `now`).
CheckResult checkLease(const std::optional<nlohmann::json>& lease, WallTime now);
// The webhook configuration exists and every webhook carries a CA bundle (or asks cert-manager).
CheckResult checkWebhook(const std::optional<nlohmann::json>& config);

// Lines of a report: "ok    name: detail" or "FAIL  name: detail".
std::string formatResults(const std::vector<CheckResult>& results);

}  // namespace kshard::tools
