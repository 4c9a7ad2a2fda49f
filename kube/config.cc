#include "kube/config.h"

#include <cstdlib>
#include <filesystem>

namespace kshard::kube {
namespace {

std::string joinPath(const std::string& dir, const std::string& file) {
  return (std::filesystem::path(dir) / file).string();
}

}  // namespace

Environment processEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Status parseServerUrl(const std::string& server, Config& out) {
  const auto schemeEnd = server.find("://");
  if (schemeEnd == std::string::npos) {
    return invalidArgument("server \"" + server + "\" is not a URL (expected https://host:port)");
  }
  const std::string scheme = server.substr(0, schemeEnd);
  if (scheme != "https" && scheme != "http") {
    return invalidArgument("server \"" + server + "\": scheme must be https or http");
  }
  const auto hostStart = schemeEnd + 3;
  const auto pathStart = server.find('/', hostStart);
  const std::string authority = server.substr(
      hostStart, pathStart == std::string::npos ? std::string::npos : pathStart - hostStart);
  if (authority.empty()) return invalidArgument("server \"" + server + "\" has no host");
  if (authority.find_first_of("?#@") != std::string::npos) {
    return invalidArgument("server \"" + server +
                           "\": user info, query and fragment are not supported");
  }
  out.baseUrl = scheme + "://" + authority;
  out.pathPrefix = pathStart == std::string::npos ? "" : server.substr(pathStart);
  while (!out.pathPrefix.empty() && out.pathPrefix.back() == '/') out.pathPrefix.pop_back();
  return {};
}

StatusOr<Config> inClusterConfig(const Environment& env, const Clock& clock) {
  const auto host = env("KUBERNETES_SERVICE_HOST");
  const auto port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return failedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  std::string dir = kServiceAccountDir;
  if (auto d = env(kServiceAccountDirEnv); d && !d->empty()) dir = *d;

  Config c;
  // An IPv6 service address needs brackets in a URL.
  const std::string hostPart = host->find(':') != std::string::npos ? "[" + *host + "]" : *host;
  c.baseUrl = "https://" + hostPart + ":" + *port;
  c.source = "in-cluster (" + dir + ")";

  const std::string tokenPath = joinPath(dir, "token");
  auto tokenSource = std::make_shared<FileTokenSource>(tokenPath, clock);
  if (auto t = tokenSource->token(); !t.ok()) {
    return t.status().withContext("in-cluster config");
  }
  c.token = std::move(tokenSource);

  const std::string caPath = joinPath(dir, "ca.crt");
  if (auto ca = readFile(caPath); !ca.ok()) return ca.status().withContext("in-cluster config");
  c.tls.caFile = caPath;

  if (auto ns = readFile(joinPath(dir, "namespace")); ns.ok()) {
    std::string n = *ns;
    while (!n.empty() && (n.back() == '\n' || n.back() == ' ' || n.back() == '\r')) n.pop_back();
    if (!n.empty()) c.defaultNamespace = n;
  }
  return c;
}

StatusOr<Config> loadConfig(const LoadOptions& options, const Clock& clock) {
  if (!options.kubeconfigPath.empty()) {
    return kubeconfigConfig({options.kubeconfigPath}, options.context, clock);
  }
  if (auto kc = options.env("KUBECONFIG"); kc && !kc->empty()) {
    std::vector<std::string> paths;
    std::size_t start = 0;
    for (;;) {
      const auto colon = kc->find(':', start);
      std::string p =
          kc->substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!p.empty()) paths.push_back(std::move(p));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    // kubectl skips listed files that do not exist; all missing is an error.
    std::vector<std::string> existing;
    for (const auto& p : paths) {
      if (std::filesystem::exists(p)) existing.push_back(p);
    }
    if (existing.empty()) {
      return notFound("KUBECONFIG=" + *kc + ": none of the listed files exists");
    }
    return kubeconfigConfig(existing, options.context, clock);
  }
  if (auto host = options.env("KUBERNETES_SERVICE_HOST"); host && !host->empty()) {
    return inClusterConfig(options.env, clock);
  }
  if (auto home = options.env("HOME"); home && !home->empty()) {
    const std::string path = joinPath(*home, ".kube/config");
    if (std::filesystem::exists(path)) return kubeconfigConfig({path}, options.context, clock);
  }
  return notFound(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a pod, or create "
      "~/.kube/config");
}

http::ClientOptions httpClientOptions(const Config& config, const std::string& userAgent) {
  http::ClientOptions o;
  o.baseUrl = config.baseUrl;
  o.tls = config.tls;
  o.userAgent = userAgent;
  return o;
}

}  // namespace kshard::kube
