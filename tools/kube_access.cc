#include "tools/kube_access.h"

#include <random>

#include "http/factory.h"
#include "kube/config.h"

namespace kshard::tools {

StatusOr<std::unique_ptr<KubeAccess>> connectToCluster(const std::string& kubeconfig) {
  kube::LoadOptions load;
  load.kubeconfigPath = kubeconfig;
  auto config = kube::loadConfig(load, SystemClock::instance());
  if (!config.ok()) return config.status();
  auto access = std::make_unique<KubeAccess>(std::random_device{}());
  auto transport =
      http::makeClient(http::Backend::kCppRest, kube::httpClientOptions(*config, "kshardctl"));
  if (!transport.ok()) return transport.status();
  access->transport = std::move(*transport);
  access->defaultNamespace = config->defaultNamespace;
  kube::ClientOptions apiOptions;
  apiOptions.userAgent = "kshardctl";
  apiOptions.maxRetries = 2;
  access->api =
      std::make_unique<kube::Client>(*access->transport, access->scheduler, access->random,
                                     access->logger, apiOptions, config->token, config->pathPrefix);
  return access;
}

}  // namespace kshard::tools
