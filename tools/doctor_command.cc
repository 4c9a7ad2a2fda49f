#include "tools/doctor_command.h"

#include <ostream>

#include "base/options.h"
#include "http/factory.h"
#include "kube/client.h"
#include "tools/doctor_checks.h"
#include "tools/kube_access.h"

namespace kshard::tools {
namespace {

constexpr char kName[] = "doctor";

constexpr char kUsage[] = R"(Usage: kshardctl doctor [options]

Checks a kshard installation and prints one line per check; exits 0 when all pass, 1 otherwise:
  - the ShardMap and ShardMapSegment CRDs are installed and established;
  - operator pods are ready, and each ready one answers /readyz on its admin port;
  - a replica holds the leader Lease and renews it;
  - the sidecar injection webhook is configured with a CA bundle.
It uses the in-cluster configuration inside a pod (the chart's helm test), else $KUBECONFIG.

Options:
  --namespace NS     the operator's namespace (default kshard-system)
  --selector SEL     label selector of the operator pods
                     (default app.kubernetes.io/component=operator)
  --webhook NAME     the MutatingWebhookConfiguration (default kshard-sidecar-injector)
  --lease NAME       the leader Lease (default kshard-operator)
  --admin-port N     the operator's admin port (default 7202)
  --kubeconfig FILE  kubeconfig to use instead of the default search
  -h, --help         show this help
)";

const kube::ResourceRef kWebhookConfigs{"admissionregistration.k8s.io", "v1",
                                        "mutatingwebhookconfigurations", kube::Scope::kCluster};

std::optional<nlohmann::json> getOrNothing(kube::Client& api, const kube::ResourceRef& r,
                                           std::string_view ns, std::string_view name,
                                           std::vector<CheckResult>& errors) {
  auto obj = api.get(r, ns, name);
  if (obj.ok()) return *obj;
  if (obj.status().code() != StatusCode::kNotFound) {
    errors.push_back(
        {"read " + r.displayName() + " " + std::string(name), false, obj.status().toString()});
  }
  return std::nullopt;
}

int run(std::span<const std::string> args, CommandIo& io) {
  if (wantsHelp(args)) {
    io.out << kUsage;
    return kExitOk;
  }
  std::string ns = "kshard-system";
  std::string selector = "app.kubernetes.io/component=operator";
  std::string webhook = "kshard-sidecar-injector";
  std::string lease = "kshard-operator";
  std::int64_t adminPort = 7202;
  std::string kubeconfig;
  OptionSet opts("kshardctl doctor", "");
  opts.addString("namespace", "", "", &ns);
  opts.addString("selector", "", "", &selector);
  opts.addString("webhook", "", "", &webhook);
  opts.addString("lease", "", "", &lease);
  opts.addInt("admin-port", "", "", &adminPort, 1, 65535);
  opts.addString("kubeconfig", "", "", &kubeconfig);
  if (Status s = parseArguments(opts, args); !s.ok()) return usageError(io, kName, s.message());

  auto access = connectToCluster(kubeconfig);
  if (!access.ok()) {
    io.err << "kshardctl doctor: " << access.status().message() << "\n";
    return kExitFailure;
  }
  kube::Client& api = *(*access)->api;

  std::vector<CheckResult> results;
  results.push_back(checkCrd(getOrNothing(api, kube::resources::kCustomResourceDefinitions, "",
                                          "shardmaps.kshard.io", results)));
  results.push_back(checkCrd(getOrNothing(api, kube::resources::kCustomResourceDefinitions, "",
                                          "shardmapsegments.kshard.io", results),
                             "shardmapsegments.kshard.io", "crds/shardmapsegment.yaml"));
  results.push_back(checkCrd(getOrNothing(api, kube::resources::kCustomResourceDefinitions, "",
                                          "shardentities.kshard.io", results),
                             "shardentities.kshard.io", "crds/shardentities.yaml"));
  std::vector<nlohmann::json> pods;
  kube::ListOptions list;
  list.labelSelector = selector;
  auto podList = api.listAll(kube::resources::kPods, ns, list);
  if (podList.ok()) {
    pods = podList->items;
  } else {
    results.push_back({"list operator pods", false, podList.status().toString()});
  }
  results.push_back(checkOperatorPods(pods));
  for (const auto& pod : pods) {
    const std::string ip = pod.value("status", nlohmann::json::object()).value("podIP", "");
    const std::string name = pod.value("metadata", nlohmann::json::object()).value("name", "");
    if (ip.empty()) continue;
    http::ClientOptions o;
    o.baseUrl = "http://" + ip + ":" + std::to_string(adminPort);
    o.connectTimeout = std::chrono::seconds(2);
    o.requestTimeout = std::chrono::seconds(5);
    auto client = http::makeClient(http::Backend::kCppRest, o);
    if (!client.ok()) continue;
    http::Request req;
    req.target = "/readyz";
    auto res = (*client)->sendSync(std::move(req));
    CheckResult r{"operator " + name + " /readyz", res.ok() && res->status == 200, ""};
    r.detail = res.ok() ? std::to_string(res->status) + " " + res->body.substr(0, 200)
                        : res.status().toString();
    results.push_back(std::move(r));
  }
  results.push_back(checkLease(getOrNothing(api, kube::resources::kLeases, ns, lease, results),
                               SystemClock::instance().wallNow()));
  results.push_back(checkWebhook(getOrNothing(api, kWebhookConfigs, "", webhook, results)));

  io.out << formatResults(results);
  const bool allOk =
      std::all_of(results.begin(), results.end(), [](const CheckResult& r) { return r.ok; });
  io.out << (allOk ? "kshard is healthy\n" : "kshard has problems: see FAIL lines above\n");
  return allOk ? kExitOk : kExitFailure;
}

}  // namespace

const Command& doctorCommand() {
  static const Command command{kName, "check a kshard installation (the chart's helm test)", kUsage,
                               run};
  return command;
}

}  // namespace kshard::tools
