// Config: where the Kubernetes API is and how to authenticate to it, loaded the way client-go and
// controller-runtime do:
//   1. an explicit kubeconfig path (the --kubeconfig flag),
//   2. the KUBECONFIG environment variable (a ':'-separated list of files, merged: the first file
//      to define a name wins, as kubectl does),
//   3. in-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the ServiceAccount files
//      (token, ca.crt, namespace) in /var/run/secrets/kubernetes.io/serviceaccount/, or in the
//      directory named by KSHARD_SERVICEACCOUNT_DIR (for running outside a pod or in tests),
//   4. $HOME/.kube/config.
//
// A broken kubeconfig fails with an error naming the file and the field:
//   "kubeconfig /x: users[0].user.client-certificate-data: not valid base64"
//
// Supported kubeconfig credentials: client certificate and key (file or data), bearer token
// (`token` or `tokenFile`), CA (file or data), insecure-skip-tls-verify, tls-server-name. Basic
// auth, exec plugins and auth-providers are rejected with a clear error.
//
// Loading is synchronous and reads files; do it at start-up. A Config is a value; its TokenSource
// is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "http/client.h"
#include "kube/token_source.h"

namespace kshard::kube {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
// Overrides kServiceAccountDir.
inline constexpr const char* kServiceAccountDirEnv = "KSHARD_SERVICEACCOUNT_DIR";

struct Config {
  // scheme://host[:port], as http::ClientOptions::baseUrl wants it.
  std::string baseUrl;
  // A path prefix of the server URL ("/k8s/clusters/c-1" behind some proxies); usually empty.
  std::string pathPrefix;
  http::TlsClientOptions tls;
  // Null when requests carry no bearer token (client certificates, or no authentication).
  std::shared_ptr<TokenSource> token;
  // The context's namespace, or the pod's own namespace in-cluster; "default" when unset.
  std::string defaultNamespace = "default";
  // Where this came from, for logs: "in-cluster" or "kubeconfig /path, context kind".
  std::string source;
};

// Looks up an environment variable; injected so that tests set their own environment.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
Environment processEnvironment();

struct LoadOptions {
  std::string kubeconfigPath;  // the --kubeconfig flag; empty to fall through
  std::string context;         // overrides current-context; empty for current-context
  Environment env = processEnvironment();
};

// The whole search order above.
StatusOr<Config> loadConfig(const LoadOptions& options, const Clock& clock);

// In-cluster configuration. FailedPrecondition when KUBERNETES_SERVICE_HOST/PORT are not set.
StatusOr<Config> inClusterConfig(const Environment& env, const Clock& clock);

// One or more kubeconfig files, merged in order. `context` empty means current-context.
StatusOr<Config> kubeconfigConfig(const std::vector<std::string>& paths, const std::string& context,
                                  const Clock& clock);

// Parses kubeconfig YAML text; `path` names the file in errors and anchors relative file paths.
StatusOr<Config> parseKubeconfig(const std::string& text, const std::string& path,
                                 const std::string& context, const Clock& clock);

// Splits "https://host:6443/prefix" into Config::baseUrl and Config::pathPrefix.
Status parseServerUrl(const std::string& server, Config& out);

// The http::ClientOptions for talking to `config`'s server as `userAgent`
// ("kshard-operator/0.1.0").
http::ClientOptions httpClientOptions(const Config& config, const std::string& userAgent);

}  // namespace kshard::kube
