// ApiRequest: one Kubernetes REST call as a value (verb, path, query, body), and the builders for
// every verb kube::Client offers. Building is pure and separate from sending, so callers can pass
// requests around and tests can check paths and query strings without a server.
//
//   auto req = kube::listRequest(kube::resources::kPods, "demo",
//                                {.labelSelector = "kshard.io/shard-map=counter", .limit = 500});
//   req.target()  //
//   "/api/v1/namespaces/demo/pods?labelSelector=kshard.io%2Fshard-map%3Dcounter&limit=500"
//
// Plain values; thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/message.h"
#include "kube/resource.h"

namespace kshard::kube {

struct ApiRequest {
  http::Method method = http::Method::kGet;
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;  // unencoded; encoded by target()
  std::optional<nlohmann::json> body;
  std::string contentType = "application/json";
  // What the answer may be: JSON, or e.g. "application/jwk-set+json" for /openid/v1/jwks, which
  // the API server refuses (406) to send as application/json.
  std::string accept = "application/json";
  // Per-attempt timeout; zero means the client's default.
  std::chrono::milliseconds timeout{0};
  // "get pods demo/counter-0": the context of error messages and logs.
  std::string description;
  // Set by a builder given bad arguments (a namespaced object without a namespace, an update
  // without metadata.name); the client fails the call with it and sends nothing.
  Status invalid;

  // Path plus the percent-encoded query: what goes on the wire.
  std::string target() const;
  // Whether a transport error or a 5xx may be retried: GET only, as client-go (a retried write may
  // already have been applied; its second attempt would then report a misleading Conflict or
  // NotFound).
  bool idempotent() const { return method == http::Method::kGet; }
};

struct ListOptions {
  std::string labelSelector;  // "app=counter,tier!=db"
  std::string fieldSelector;  // "metadata.name=counter"
  std::int64_t limit = 0;     // page size; 0 = everything in one response
  std::string continueToken;  // from the previous page's metadata.continue
  // "" = the most recent (a quorum read); "0" = any (served from the watch cache).
  std::string resourceVersion;
  std::string resourceVersionMatch;  // "NotOlderThan" | "Exact" | ""
  std::chrono::seconds timeout{0};   // server-side timeoutSeconds; 0 = none
  // Only the items' metadata (PartialObjectMetadataList): what a reader that only needs to
  // know that an object changed asks for.
  bool metadataOnly = false;
};

struct WatchOptions {
  std::string labelSelector;
  std::string fieldSelector;
  std::string resourceVersion;  // start after this version (the list's metadata.resourceVersion)
  bool allowWatchBookmarks = true;
  std::chrono::seconds timeout{0};  // timeoutSeconds: the server ends the watch after this
  bool metadataOnly = false;        // events carry PartialObjectMetadata, not the objects
};

// The Accept values of metadata-only reads (client-go's metadata client).
inline constexpr char kAcceptMetadataList[] =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
inline constexpr char kAcceptMetadata[] =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

struct WriteOptions {
  std::string subresource;   // "status", "binding", "token", "eviction"
  std::string fieldManager;  // required for server-side apply
  bool dryRun = false;
};

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kJson,            // application/json-patch+json (RFC 6902); the patch is an array
  kStrategicMerge,  // application/strategic-merge-patch+json; built-in types only
  kApply,           // application/apply-patch+yaml: server-side apply, needs a field manager
};
std::string_view patchContentType(PatchType type);

enum class PropagationPolicy { kDefault, kOrphan, kBackground, kForeground };

struct DeleteOptions {
  std::optional<std::int64_t> gracePeriodSeconds;
  // Preconditions: the delete fails with Conflict unless the object still has this uid / version.
  std::string preconditionUid;
  std::string preconditionResourceVersion;
  PropagationPolicy propagationPolicy = PropagationPolicy::kDefault;
  bool dryRun = false;
};

ApiRequest getRequest(const ResourceRef& resource, std::string_view ns, std::string_view name,
                      std::string_view subresource = {});
ApiRequest listRequest(const ResourceRef& resource, std::string_view ns,
                       const ListOptions& options = {});
ApiRequest watchRequest(const ResourceRef& resource, std::string_view ns,
                        const WatchOptions& options);
// POST to the collection; `object` carries metadata.name or metadata.generateName.
ApiRequest createRequest(const ResourceRef& resource, std::string_view ns, nlohmann::json object,
                         const WriteOptions& options = {});
// POST to a subresource of a named object: pods/{name}/binding, serviceaccounts/{name}/token,
// pods/{name}/eviction.
ApiRequest createSubresourceRequest(const ResourceRef& resource, std::string_view ns,
                                    std::string_view name, std::string_view subresource,
                                    nlohmann::json body, const WriteOptions& options = {});
// PUT of the whole object (or its subresource); the name comes from object.metadata.name. When the
// object carries metadata.resourceVersion the API server rejects a stale write with Conflict.
ApiRequest updateRequest(const ResourceRef& resource, std::string_view ns, nlohmann::json object,
                         const WriteOptions& options = {});
ApiRequest patchRequest(const ResourceRef& resource, std::string_view ns, std::string_view name,
                        PatchType type, nlohmann::json patch, const WriteOptions& options = {});
ApiRequest deleteRequest(const ResourceRef& resource, std::string_view ns, std::string_view name,
                         const DeleteOptions& options = {});

}  // namespace kshard::kube
