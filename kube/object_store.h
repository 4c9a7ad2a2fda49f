// ObjectStore: an informer's local cache, the latest known version of each object keyed by
// "namespace/name" (objectKey). Objects are shared immutable JSON values, so readers keep what
// they got while the informer moves on.
//
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kshard::kube {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

// The string metadata.<key> of an object ("" when absent or not a string).
std::string metadataString(const nlohmann::json& object, const char* key);
// metadata.namespace / metadata.name / metadata.resourceVersion / metadata.uid of an object
// ("" when absent).
std::string namespaceOf(const nlohmann::json& object);
std::string nameOf(const nlohmann::json& object);
std::string resourceVersionOf(const nlohmann::json& object);
std::string uidOf(const nlohmann::json& object);
// objectKey(namespaceOf(o), nameOf(o)).
std::string keyOf(const nlohmann::json& object);

class ObjectStore {
 public:
  ObjectPtr get(std::string_view ns, std::string_view name) const;
  ObjectPtr getByKey(const std::string& key) const;
  // Every object, ordered by key.
  std::vector<ObjectPtr> list() const;
  std::vector<std::string> keys() const;
  std::size_t size() const;

  // Stores `object` under `key`; returns the previous object (null if none).
  ObjectPtr put(const std::string& key, ObjectPtr object);
  // Removes `key`; returns what was there (null if none).
  ObjectPtr erase(const std::string& key);

 private:
  mutable std::mutex mu_;
  std::map<std::string, ObjectPtr, std::less<>> objects_;
};

}  // namespace kshard::kube
