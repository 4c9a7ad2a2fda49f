#include "tools/doctor_checks.h"

#include <sstream>

#include "kube/api_time.h"

namespace kshard::tools {

using nlohmann::json;

namespace {

bool conditionTrue(const json& obj, const std::string& type) {
  const json& conditions = obj.value("status", json::object()).value("conditions", json::array());
  for (const auto& c : conditions) {
    if (c.is_object() && c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

}  // namespace

CheckResult checkCrd(const std::optional<json>& crd, std::string_view name,
                     std::string_view file) {
  const std::string n(name);
  CheckResult r{"CRD " + n, false, ""};
  if (!crd) {
    r.detail = "customresourcedefinition " + n +
               " not found: install the chart (its crds/ folder) or kubectl apply -f " +
               std::string(file);
  } else if (!conditionTrue(*crd, "Established")) {
    r.detail = n + " exists but is not Established yet";
  } else {
    r.ok = true;
    r.detail = n + " is established";
  }
  return r;
}

CheckResult checkOperatorPods(const std::vector<json>& pods) {
  CheckResult r{"operator pods", false, ""};
  int ready = 0;
  for (const auto& p : pods) {
    if (conditionTrue(p, "Ready")) ++ready;
  }
  r.ok = ready > 0;
  r.detail = std::to_string(ready) + " of " + std::to_string(pods.size()) + " ready";
  if (!r.ok) {
    r.detail += pods.empty() ? ": no operator pod found (check --namespace and --selector)"
                             : ": see kubectl describe pod and the operator's logs";
  }
  return r;
}

CheckResult checkLease(const std::optional<json>& lease, WallTime now) {
  CheckResult r{"leader", false, ""};
  if (!lease) {
    r.detail = "no Lease kshard-operator: no replica has ever led";
    return r;
  }
  const json& spec = lease->value("spec", json::object());
  const std::string holder = spec.value("holderIdentity", "");
  if (holder.empty()) {
    r.detail = "the Lease has no holder: the last leader released it and none took over yet";
    return r;
  }
  const auto renew = kube::parseTime(spec.value("renewTime", ""));
  const auto duration = std::chrono::seconds(spec.value("leaseDurationSeconds", 15));
  if (!renew.ok()) {
    r.detail = "the Lease held by " + holder + " has no valid renewTime";
    return r;
  }
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - *renew);
  r.ok = age <= duration;
  r.detail = holder + " leads, renewed " + std::to_string(age.count()) + " s ago";
  if (!r.ok) r.detail += " (longer than the lease duration: the leader is gone or stuck)";
  return r;
}

CheckResult checkWebhook(const std::optional<json>& config) {
  CheckResult r{"sidecar injection webhook", false, ""};
  if (!config) {
    r.detail = "MutatingWebhookConfiguration not found: annotated pods would not get a sidecar";
    return r;
  }
  const bool certManager = config->value("metadata", json::object())
                               .value("annotations", json::object())
                               .contains("cert-manager.io/inject-ca-from");
  const json& hooks = config->value("webhooks", json::array());
  if (hooks.empty()) {
    r.detail = "the configuration has no webhook";
    return r;
  }
  for (const auto& h : hooks) {
    const std::string ca = h.value("clientConfig", json::object()).value("caBundle", "");
    if (ca.empty()) {
      r.detail = certManager ? "cert-manager has not injected the CA bundle yet"
                             : "a webhook has no caBundle: the API server cannot trust it";
      return r;
    }
  }
  r.ok = true;
  r.detail = std::to_string(hooks.size()) + " webhook(s) with a CA bundle";
  return r;
}

std::string formatResults(const std::vector<CheckResult>& results) {
  std::ostringstream out;
  for (const auto& r : results) {
    out << (r.ok ? "ok    " : "FAIL  ") << r.name << ": " << r.detail << "\n";
  }
  return out.str();
}

}  // namespace kshard::tools
