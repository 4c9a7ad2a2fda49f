#include "kube/api_request.h"

#include <string>
#include <utility>

#include "base/enum_names.h"

#include "kube/object_store.h"

namespace kshard::kube {
namespace {

using nlohmann::json;

std::string describe(std::string_view verb, const ResourceRef& r, std::string_view ns,
                     std::string_view name, std::string_view subresource) {
  std::string d(verb);
  d += " ";
  d += r.displayName();
  if (!subresource.empty()) {
    d += "/";
    d += subresource;
  }
  if (!ns.empty() || !name.empty()) {
    d += " ";
    d += name.empty() ? std::string(ns) : objectKey(ns, name);
  }
  return d;
}

// Scope checks shared by every builder: a namespaced object needs its namespace, a cluster-scoped
// one must not have one. `collection` allows an empty namespace (all namespaces) on lists.
Status checkScope(const ResourceRef& r, std::string_view ns, bool collection) {
  if (r.namespaced() && ns.empty() && !collection) {
    return invalidArgument(r.displayName() + " are namespaced: a namespace is required");
  }
  if (!r.namespaced() && !ns.empty()) {
    return invalidArgument(r.displayName() +
                           " are cluster-scoped: the namespace must be empty, not \"" +
                           std::string(ns) + "\"");
  }
  return {};
}

Status checkName(std::string_view name, std::string_view what) {
  if (name.empty()) return invalidArgument(std::string(what) + " needs a name");
  if (name.find('/') != std::string_view::npos || name == "." || name == "..") {
    return invalidArgument("\"" + std::string(name) + "\" is not a valid object name");
  }
  return {};
}

// A request's start: its method, and the description its errors and logs carry.
ApiRequest started(http::Method method, std::string_view verb, const ResourceRef& r,
                   std::string_view ns, std::string_view name, std::string_view subresource) {
  ApiRequest req;
  req.method = method;
  req.description = describe(verb, r, ns, name, subresource);
  return req;
}

// A write's end, once its checks passed: where it goes, the write options and the body.
ApiRequest completeWrite(ApiRequest req, std::string path, const WriteOptions& o, json body) {
  req.path = std::move(path);
  if (o.dryRun) req.query.emplace_back("dryRun", "All");
  if (!o.fieldManager.empty()) req.query.emplace_back("fieldManager", o.fieldManager);
  req.body = std::move(body);
  return req;
}

ApiRequest fail(ApiRequest req, Status s) {
  req.invalid = std::move(s);
  return req;
}

void addIfSet(ApiRequest& req, const char* key, const std::string& value) {
  if (!value.empty()) req.query.emplace_back(key, value);
}

// A GET on a collection (list or watch), selectors first.
ApiRequest collectionGet(std::string_view verb, const ResourceRef& r, std::string_view ns,
                         const std::string& labelSelector, const std::string& fieldSelector) {
  ApiRequest req = started(http::Method::kGet, verb, r, ns, {}, {});
  if (Status s = checkScope(r, ns, true); !s.ok()) return fail(std::move(req), s);
  req.path = r.collectionPath(ns);
  addIfSet(req, "labelSelector", labelSelector);
  addIfSet(req, "fieldSelector", fieldSelector);
  return req;
}

}  // namespace

std::string ApiRequest::target() const {
  std::string t = path;
  char sep = '?';
  for (const auto& [k, v] : query) {
    t += sep;
    t += http::percentEncode(k);
    t += '=';
    t += http::percentEncode(v);
    sep = '&';
  }
  return t;
}

std::string_view patchContentType(PatchType type) {
  constexpr std::pair<PatchType, std::string_view> kContentTypes[] = {
      {PatchType::kMerge, "application/merge-patch+json"},
      {PatchType::kJson, "application/json-patch+json"},
      {PatchType::kStrategicMerge, "application/strategic-merge-patch+json"},
      {PatchType::kApply, "application/apply-patch+yaml"}};
  return nameIn(kContentTypes, type, "application/merge-patch+json");
}

ApiRequest getRequest(const ResourceRef& r, std::string_view ns, std::string_view name,
                      std::string_view subresource) {
  ApiRequest req = started(http::Method::kGet, "get", r, ns, name, subresource);
  if (Status s = checkScope(r, ns, false); !s.ok()) return fail(std::move(req), s);
  if (Status s = checkName(name, "get"); !s.ok()) return fail(std::move(req), s);
  req.path = r.objectPath(ns, name, subresource);
  return req;
}

ApiRequest listRequest(const ResourceRef& r, std::string_view ns, const ListOptions& o) {
  ApiRequest req = collectionGet("list", r, ns, o.labelSelector, o.fieldSelector);
  if (!req.invalid.ok()) return req;
  if (o.limit > 0) req.query.emplace_back("limit", std::to_string(o.limit));
  addIfSet(req, "continue", o.continueToken);
  addIfSet(req, "resourceVersion", o.resourceVersion);
  addIfSet(req, "resourceVersionMatch", o.resourceVersionMatch);
  if (o.timeout.count() > 0) {
    req.query.emplace_back("timeoutSeconds", std::to_string(o.timeout.count()));
  }
  if (o.metadataOnly) req.accept = kAcceptMetadataList;
  return req;
}

ApiRequest watchRequest(const ResourceRef& r, std::string_view ns, const WatchOptions& o) {
  ApiRequest req = collectionGet("watch", r, ns, o.labelSelector, o.fieldSelector);
  if (!req.invalid.ok()) return req;
  req.query.insert(req.query.begin(), {"watch", "true"});
  addIfSet(req, "resourceVersion", o.resourceVersion);
  if (o.allowWatchBookmarks) req.query.emplace_back("allowWatchBookmarks", "true");
  if (o.timeout.count() > 0) {
    req.query.emplace_back("timeoutSeconds", std::to_string(o.timeout.count()));
  }
  if (o.metadataOnly) req.accept = kAcceptMetadata;
  return req;
}

ApiRequest createRequest(const ResourceRef& r, std::string_view ns, json object,
                         const WriteOptions& o) {
  const std::string name = metadataString(object, "name");
  ApiRequest req = started(http::Method::kPost, "create", r, ns, name, o.subresource);
  if (!o.subresource.empty()) {
    return fail(std::move(req),
                invalidArgument("create of a subresource needs the parent's name: use "
                                "createSubresourceRequest"));
  }
  if (Status s = checkScope(r, ns, false); !s.ok()) return fail(std::move(req), s);
  if (!object.is_object()) return fail(std::move(req), invalidArgument("create needs an object"));
  if (name.empty() && metadataString(object, "generateName").empty()) {
    return fail(std::move(req),
                invalidArgument("create needs metadata.name or metadata.generateName"));
  }
  const std::string objectNs = metadataString(object, "namespace");
  if (!objectNs.empty() && objectNs != ns) {
    return fail(std::move(req), invalidArgument("metadata.namespace \"" + objectNs +
                                                "\" does not match the namespace \"" +
                                                std::string(ns) + "\" of the request"));
  }
  return completeWrite(std::move(req), r.collectionPath(ns), o, std::move(object));
}

ApiRequest createSubresourceRequest(const ResourceRef& r, std::string_view ns,
                                    std::string_view name, std::string_view subresource, json body,
                                    const WriteOptions& o) {
  ApiRequest req = started(http::Method::kPost, "create", r, ns, name, subresource);
  if (Status s = checkScope(r, ns, false); !s.ok()) return fail(std::move(req), s);
  if (Status s = checkName(name, "create of a subresource"); !s.ok()) {
    return fail(std::move(req), s);
  }
  if (subresource.empty()) {
    return fail(std::move(req), invalidArgument("createSubresourceRequest needs a subresource"));
  }
  return completeWrite(std::move(req), r.objectPath(ns, name, subresource), o, std::move(body));
}

ApiRequest updateRequest(const ResourceRef& r, std::string_view ns, json object,
                         const WriteOptions& o) {
  const std::string name = metadataString(object, "name");
  ApiRequest req = started(http::Method::kPut, "update", r, ns, name, o.subresource);
  if (Status s = checkScope(r, ns, false); !s.ok()) return fail(std::move(req), s);
  if (Status s = checkName(name, "update (metadata.name)"); !s.ok()) {
    return fail(std::move(req), s);
  }
  return completeWrite(std::move(req), r.objectPath(ns, name, o.subresource), o, std::move(object));
}

ApiRequest patchRequest(const ResourceRef& r, std::string_view ns, std::string_view name,
                        PatchType type, json patch, const WriteOptions& o) {
  ApiRequest req = started(http::Method::kPatch, "patch", r, ns, name, o.subresource);
  if (Status s = checkScope(r, ns, false); !s.ok()) return fail(std::move(req), s);
  if (Status s = checkName(name, "patch"); !s.ok()) return fail(std::move(req), s);
  if (type == PatchType::kJson && !patch.is_array()) {
    return fail(std::move(req), invalidArgument("a JSON patch is an array of operations"));
  }
  if (type != PatchType::kJson && !patch.is_object()) {
    return fail(std::move(req), invalidArgument("a merge or apply patch is an object"));
  }
  if (type == PatchType::kApply && o.fieldManager.empty()) {
    return fail(std::move(req), invalidArgument("server-side apply needs a field manager"));
  }
  req.contentType = std::string(patchContentType(type));
  return completeWrite(std::move(req), r.objectPath(ns, name, o.subresource), o, std::move(patch));
}

ApiRequest deleteRequest(const ResourceRef& r, std::string_view ns, std::string_view name,
                         const DeleteOptions& o) {
  ApiRequest req = started(http::Method::kDelete, "delete", r, ns, name, {});
  if (Status s = checkScope(r, ns, false); !s.ok()) return fail(std::move(req), s);
  if (Status s = checkName(name, "delete"); !s.ok()) return fail(std::move(req), s);
  req.path = r.objectPath(ns, name);
  json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (o.gracePeriodSeconds) body["gracePeriodSeconds"] = *o.gracePeriodSeconds;
  if (!o.preconditionUid.empty()) body["preconditions"]["uid"] = o.preconditionUid;
  if (!o.preconditionResourceVersion.empty()) {
    body["preconditions"]["resourceVersion"] = o.preconditionResourceVersion;
  }
  switch (o.propagationPolicy) {
    case PropagationPolicy::kDefault:
      break;
    case PropagationPolicy::kOrphan:
      body["propagationPolicy"] = "Orphan";
      break;
    case PropagationPolicy::kBackground:
      body["propagationPolicy"] = "Background";
      break;
    case PropagationPolicy::kForeground:
      body["propagationPolicy"] = "Foreground";
      break;
  }
  if (o.dryRun) body["dryRun"] = json::array({"All"});
  req.body = std::move(body);
  return req;
}

}  // namespace kshard::kube
