#include "kube/object_store.h"

#include "kube/resource.h"

namespace kshard::kube {

std::string metadataString(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return {};
  auto v = md->find(key);
  if (v == md->end() || !v->is_string()) return {};
  return v->get<std::string>();
}

std::string namespaceOf(const nlohmann::json& o) { return metadataString(o, "namespace"); }
std::string nameOf(const nlohmann::json& o) { return metadataString(o, "name"); }
std::string resourceVersionOf(const nlohmann::json& o) {
  return metadataString(o, "resourceVersion");
}
std::string uidOf(const nlohmann::json& o) { return metadataString(o, "uid"); }
std::string keyOf(const nlohmann::json& o) { return objectKey(namespaceOf(o), nameOf(o)); }

ObjectPtr ObjectStore::get(std::string_view ns, std::string_view name) const {
  return getByKey(objectKey(ns, name));
}

ObjectPtr ObjectStore::getByKey(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> ObjectStore::list() const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(obj);
  return out;
}

std::vector<std::string> ObjectStore::keys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(key);
  return out;
}

std::size_t ObjectStore::size() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

ObjectPtr ObjectStore::put(const std::string& key, ObjectPtr object) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = objects_.try_emplace(key, object);
  if (inserted) return nullptr;
  ObjectPtr previous = std::move(it->second);
  it->second = std::move(object);
  return previous;
}

ObjectPtr ObjectStore::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr previous = std::move(it->second);
  objects_.erase(it);
  return previous;
}

}  // namespace kshard::kube
