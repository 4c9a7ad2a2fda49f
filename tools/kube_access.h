// A Kubernetes API client for kshardctl's commands that read the cluster (doctor, owner, map):
// the in-cluster configuration inside a pod, else $KUBECONFIG or ~/.kube/config.
#pragma once

#include <memory>
#include <string>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "http/client.h"
#include "kube/client.h"

namespace kshard::tools {

struct KubeAccess {
  std::unique_ptr<http::Client> transport;
  ThreadScheduler scheduler;
  SeededRandom random;
  Logger logger{"kshardctl", LogLevel::kError};
  std::unique_ptr<kube::Client> api;
  std::string defaultNamespace;  // the context's, or the pod's in-cluster; "default" when unset

  explicit KubeAccess(std::uint64_t seed) : random(seed) {}
};

// `kubeconfig` (empty: the default search), with a few retries a call. The configuration's or the
// transport's error otherwise.
[[nodiscard]] StatusOr<std::unique_ptr<KubeAccess>> connectToCluster(const std::string& kubeconfig);

}  // namespace kshard::tools
