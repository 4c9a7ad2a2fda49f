// ResourceRef: names a Kubernetes resource type (group, version, plural resource, scope) and builds
// the REST paths for it. kube/ works with any resource as JSON; this is the only typing it has.
//
//   const kube::ResourceRef kShardMaps{"kshard.io", "v1alpha1", "shardmaps",
//   kube::Scope::kNamespaced}; kShardMaps.objectPath("demo", "counter", "status")
//     -> "/apis/kshard.io/v1alpha1/namespaces/demo/shardmaps/counter/status"
//
// Plain values; thread-compatible.
#pragma once

#include <string>
#include <string_view>

namespace kshard::kube {

enum class Scope { kNamespaced, kCluster };

struct ResourceRef {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // lower-case plural: "pods", "leases"
  Scope scope = Scope::kNamespaced;

  bool namespaced() const { return scope == Scope::kNamespaced; }
  // "v1" for the core group, "group/version" otherwise (an object's apiVersion).
  std::string apiVersion() const;
  // "/api/v1" or "/apis/{group}/{version}".
  std::string groupVersionPath() const;
  // The collection: ".../namespaces/{ns}/{resource}", or ".../{resource}" when `ns` is empty (all
  // namespaces) or the resource is cluster-scoped. Path segments are percent-encoded.
  std::string collectionPath(std::string_view ns) const;
  // One object, optionally a subresource of it ("status", "binding", "token", "eviction").
  std::string objectPath(std::string_view ns, std::string_view name,
                         std::string_view subresource = {}) const;
  // "pods", "leases.coordination.k8s.io": how kubectl and error messages name the resource.
  std::string displayName() const;

  friend bool operator==(const ResourceRef&, const ResourceRef&) = default;
};

// Resource types kshard's components use. Any other is declared the same way.
namespace resources {
inline const ResourceRef kPods{"", "v1", "pods", Scope::kNamespaced};
inline const ResourceRef kNamespaces{"", "v1", "namespaces", Scope::kCluster};
inline const ResourceRef kServiceAccounts{"", "v1", "serviceaccounts", Scope::kNamespaced};
inline const ResourceRef kConfigMaps{"", "v1", "configmaps", Scope::kNamespaced};
inline const ResourceRef kSecrets{"", "v1", "secrets", Scope::kNamespaced};
inline const ResourceRef kCoreEvents{"", "v1", "events", Scope::kNamespaced};
inline const ResourceRef kLeases{"coordination.k8s.io", "v1", "leases", Scope::kNamespaced};
inline const ResourceRef kEvents{"events.k8s.io", "v1", "events", Scope::kNamespaced};
inline const ResourceRef kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings",
                                       Scope::kNamespaced};
inline const ResourceRef kTokenReviews{"authentication.k8s.io", "v1", "tokenreviews",
                                       Scope::kCluster};
inline const ResourceRef kCustomResourceDefinitions{"apiextensions.k8s.io", "v1",
                                                    "customresourcedefinitions", Scope::kCluster};
// kshard's own (crds/shardmap.yaml).
inline const ResourceRef kShardMaps{"kshard.io", "v1alpha1", "shardmaps", Scope::kNamespaced};
inline const ResourceRef kShardMapSegments{"kshard.io", "v1alpha1", "shardmapsegments",
                                           Scope::kNamespaced};
inline const ResourceRef kShardEntities{"kshard.io", "v1alpha1", "shardentities",
                                        Scope::kNamespaced};
}  // namespace resources

// "namespace/name", or "name" for a cluster-scoped object: the key of caches and logs.
std::string objectKey(std::string_view ns, std::string_view name);

}  // namespace kshard::kube
