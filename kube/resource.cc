#include "kube/resource.h"

#include "http/message.h"

namespace kshard::kube {

std::string ResourceRef::apiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string ResourceRef::groupVersionPath() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ResourceRef::collectionPath(std::string_view ns) const {
  std::string path = groupVersionPath();
  if (namespaced() && !ns.empty()) {
    path += "/namespaces/";
    path += http::percentEncode(ns);
  }
  path += "/";
  path += resource;
  return path;
}

std::string ResourceRef::objectPath(std::string_view ns, std::string_view name,
                                    std::string_view subresource) const {
  std::string path = collectionPath(ns);
  path += "/";
  path += http::percentEncode(name);
  if (!subresource.empty()) {
    path += "/";
    path += subresource;
  }
  return path;
}

std::string ResourceRef::displayName() const {
  return group.empty() ? resource : resource + "." + group;
}

std::string objectKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key(ns);
  key += "/";
  key += name;
  return key;
}

}  // namespace kshard::kube
