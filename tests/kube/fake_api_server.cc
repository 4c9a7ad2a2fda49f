#include "tests/kube/fake_api_server.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include "kube/api_time.h"
#include "kube/object_store.h"

namespace kshard::kube::testing {
namespace {

using nlohmann::json;

http::Response statusResponse(int code, const std::string& reason, const std::string& message) {
  return jsonResponse(code, json{{"kind", "Status"},
                                 {"apiVersion", "v1"},
                                 {"metadata", json::object()},
                                 {"status", "Failure"},
                                 {"message", message},
                                 {"reason", reason},
                                 {"code", code}}
                                .dump());
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on commas outside parentheses.
std::vector<std::string> splitRequirements(const std::string& selector) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : selector) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

std::set<std::string> parseSet(const std::string& s) {
  std::set<std::string> out;
  const auto open = s.find('(');
  const auto close = s.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return out;
  std::stringstream in(s.substr(open + 1, close - open - 1));
  std::string item;
  while (std::getline(in, item, ',')) out.insert(trim(item));
  return out;
}

std::optional<std::string> labelValue(const json& labels, const std::string& key) {
  if (!labels.is_object()) return std::nullopt;
  auto it = labels.find(key);
  if (it == labels.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

bool matchesFieldSelector(const json& obj, const std::string& selector) {
  for (const auto& req : splitRequirements(selector)) {
    const bool negate = req.find("!=") != std::string::npos;
    const auto op = negate ? req.find("!=") : req.find('=');
    if (op == std::string::npos) return false;
    const std::string field = trim(req.substr(0, op));
    std::string value = trim(req.substr(op + (negate ? 2 : 1)));
    if (!value.empty() && value[0] == '=') value = value.substr(1);
    std::string actual;
    if (field == "metadata.name") {
      actual = nameOf(obj);
    } else if (field == "metadata.namespace") {
      actual = namespaceOf(obj);
    } else {
      return false;
    }
    if ((actual == value) == negate) return false;
  }
  return true;
}

struct Target {
  std::string collection;  // "g/v/resource"
  std::string ns, name, subresource;
  std::map<std::string, std::string> query;
  bool ok = false;
};

Target parseTarget(const std::string& target) {
  Target t;
  const auto q = target.find('?');
  const std::string path = target.substr(0, q);
  if (q != std::string::npos) {
    std::stringstream in(target.substr(q + 1));
    std::string kv;
    while (std::getline(in, kv, '&')) {
      const auto eq = kv.find('=');
      std::string k, v;
      http::percentDecode(kv.substr(0, eq), k, true);
      if (eq != std::string::npos) http::percentDecode(kv.substr(eq + 1), v, true);
      t.query[k] = v;
    }
  }
  std::vector<std::string> seg;
  std::stringstream in(path);
  std::string s;
  while (std::getline(in, s, '/')) {
    if (!s.empty()) seg.push_back(s);
  }
  std::size_t i = 0;
  std::string gv;
  if (seg.size() >= 2 && seg[0] == "api") {
    gv = "/" + seg[1];
    i = 2;
  } else if (seg.size() >= 3 && seg[0] == "apis") {
    gv = seg[1] + "/" + seg[2];
    i = 3;
  } else {
    return t;
  }
  if (seg.size() >= i + 3 && seg[i] == "namespaces") {
    t.ns = seg[i + 1];
    i += 2;
  }
  if (i >= seg.size()) return t;
  t.collection = gv + "/" + seg[i++];
  if (i < seg.size()) t.name = seg[i++];
  if (i < seg.size()) t.subresource = seg[i++];
  t.ok = i == seg.size();
  return t;
}

std::string collectionOf(const ResourceRef& r) {
  return (r.group.empty() ? "/" + r.version : r.group + "/" + r.version) + "/" + r.resource;
}

}  // namespace

bool matchesLabelSelector(const json& labels, const std::string& selector, std::string* error) {
  for (const auto& req : splitRequirements(selector)) {
    std::string key;
    if (req.find(" notin ") != std::string::npos) {
      key = trim(req.substr(0, req.find(" notin ")));
      auto v = labelValue(labels, key);
      if (v && parseSet(req).count(*v) != 0) return false;
    } else if (req.find(" in ") != std::string::npos) {
      key = trim(req.substr(0, req.find(" in ")));
      auto v = labelValue(labels, key);
      if (!v || parseSet(req).count(*v) == 0) return false;
    } else if (req.find("!=") != std::string::npos) {
      key = trim(req.substr(0, req.find("!=")));
      auto v = labelValue(labels, key);
      if (v && *v == trim(req.substr(req.find("!=") + 2))) return false;
    } else if (req.find('=') != std::string::npos) {
      const auto eq = req.find('=');
      key = trim(req.substr(0, eq));
      std::string value = req.substr(eq + 1);
      if (!value.empty() && value[0] == '=') value = value.substr(1);
      auto v = labelValue(labels, key);
      if (!v || *v != trim(value)) return false;
    } else if (!req.empty() && req[0] == '!') {
      if (labelValue(labels, trim(req.substr(1)))) return false;
    } else {
      if (req.find_first_of("() ") != std::string::npos) {
        if (error != nullptr) *error = "unable to parse requirement: " + req;
        return false;
      }
      if (!labelValue(labels, req)) return false;
    }
  }
  return true;
}

void FakeApiServer::intercept(Interceptor interceptor) {
  std::lock_guard lock(mu_);
  interceptor_ = std::move(interceptor);
}

std::optional<StatusOr<http::Response>> FakeApiServer::arrive(const http::Request& request) {
  Interceptor interceptor;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    interceptor = interceptor_;
  }
  if (!interceptor) return std::nullopt;
  return interceptor(request);
}

void FakeApiServer::send(http::Request request, http::ResponseCallback done) {
  if (auto answer = arrive(request)) {
    done(std::move(*answer));
    return;
  }
  http::Response response;
  {
    std::lock_guard lock(mu_);
    response = handle(request);
  }
  done(std::move(response));
}

std::uint64_t FakeApiServer::resourceVersion() const {
  std::lock_guard lock(mu_);
  return rv_;
}

std::size_t FakeApiServer::requestCount() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

std::vector<http::Request> FakeApiServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

void FakeApiServer::record(const std::string& type, const std::string& collection,
                           const json& obj) {
  history_.push_back({rv_, type, collection, obj});
  const std::string line = json{{"type", type}, {"object", obj}}.dump() + "\n";
  for (const auto& w : watchers_) {
    if (w.collection != collection) continue;
    if (!w.ns.empty() && namespaceOf(obj) != w.ns) continue;
    if (!w.labelSelector.empty() &&
        !matchesLabelSelector(obj["metadata"].value("labels", json::object()), w.labelSelector)) {
      continue;
    }
    if (!w.fieldSelector.empty() && !matchesFieldSelector(obj, w.fieldSelector)) continue;
    w.stream->write(line);
  }
}

http::Response FakeApiServer::handle(const http::Request& req) {
  const Target t = parseTarget(req.target);
  if (!t.ok)
    return statusResponse(404, "NotFound", "the server could not find the requested resource");
  auto& objects = objects_[t.collection];
  const std::string key = objectKey(t.ns, t.name);
  const std::string what = t.collection.substr(t.collection.rfind('/') + 1);
  const auto notFound = [&] {
    return statusResponse(404, "NotFound", what + " \"" + t.name + "\" not found");
  };

  if (req.method == http::Method::kGet && t.name.empty()) {
    std::vector<json> items;
    for (const auto& [k, obj] : objects) {
      if (!t.ns.empty() && namespaceOf(obj) != t.ns) continue;
      if (auto ls = t.query.find("labelSelector"); ls != t.query.end()) {
        std::string error;
        if (!matchesLabelSelector(obj["metadata"].value("labels", json::object()), ls->second,
                                  &error)) {
          if (!error.empty()) return statusResponse(400, "BadRequest", error);
          continue;
        }
      }
      if (auto fs = t.query.find("fieldSelector"); fs != t.query.end()) {
        if (!matchesFieldSelector(obj, fs->second)) continue;
      }
      items.push_back(obj);
    }
    std::size_t start = 0;
    if (auto c = t.query.find("continue"); c != t.query.end()) start = std::stoul(c->second);
    std::size_t limit = items.size();
    if (auto l = t.query.find("limit"); l != t.query.end()) limit = std::stoul(l->second);
    json page = json::array();
    for (std::size_t i = start; i < items.size() && i < start + limit; ++i)
      page.push_back(items[i]);
    json meta = {{"resourceVersion", std::to_string(rv_)}};
    if (start + limit < items.size()) meta["continue"] = std::to_string(start + limit);
    return jsonResponse(
        200,
        json{{"kind", "List"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", page}}.dump());
  }
  if (req.method == http::Method::kGet) {
    auto it = objects.find(key);
    if (it == objects.end()) return notFound();
    return jsonResponse(200, it->second.dump());
  }

  json body;
  if (!req.body.empty()) {
    body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return statusResponse(400, "BadRequest", "body is not JSON");
  }

  if (req.method == http::Method::kPost && t.name.empty()) {
    json obj = body;
    std::string name = nameOf(obj);
    if (name.empty()) {
      const std::string prefix = obj["metadata"].value("generateName", "");
      if (prefix.empty()) return statusResponse(422, "Invalid", "metadata.name: Required value");
      name = prefix + std::to_string(++uid_);
      obj["metadata"]["name"] = name;
    }
    const std::string k = objectKey(t.ns, name);
    if (objects.count(k) != 0) {
      return statusResponse(409, "AlreadyExists", what + " \"" + name + "\" already exists");
    }
    ++rv_;
    if (!t.ns.empty()) obj["metadata"]["namespace"] = t.ns;
    obj["metadata"]["uid"] = "uid-" + std::to_string(++uid_);
    obj["metadata"]["resourceVersion"] = std::to_string(rv_);
    obj["metadata"]["generation"] = 1;
    obj["metadata"]["creationTimestamp"] = formatTime(clock_.wallNow());
    objects[k] = obj;
    record("ADDED", t.collection, obj);
    return jsonResponse(201, obj.dump());
  }
  if (req.method == http::Method::kPost) {
    // Subresource creates (binding, token, eviction): accepted and echoed.
    if (objects.count(key) == 0) return notFound();
    return jsonResponse(201, body.dump());
  }

  auto it = objects.find(key);
  if (it == objects.end()) return notFound();
  json& stored = it->second;

  if (req.method == http::Method::kDelete) {
    const json pre =
        body.is_object() ? body.value("preconditions", json::object()) : json::object();
    if (pre.contains("uid") && pre["uid"] != stored["metadata"]["uid"]) {
      return statusResponse(409, "Conflict",
                            "Precondition failed: UID in precondition: " + pre["uid"].dump() +
                                ", UID in object meta: " + stored["metadata"]["uid"].dump());
    }
    if (pre.contains("resourceVersion") &&
        pre["resourceVersion"] != stored["metadata"]["resourceVersion"]) {
      return statusResponse(409, "Conflict", "Precondition failed: ResourceVersion");
    }
    json gone = stored;
    ++rv_;
    gone["metadata"]["resourceVersion"] = std::to_string(rv_);
    objects.erase(it);
    record("DELETED", t.collection, gone);
    return jsonResponse(200, gone.dump());
  }

  json updated;
  if (req.method == http::Method::kPut) {
    const std::string sentRv = resourceVersionOf(body);
    if (!sentRv.empty() && sentRv != resourceVersionOf(stored)) {
      return statusResponse(409, "Conflict",
                            "Operation cannot be fulfilled on " + what + " \"" + t.name +
                                "\": the object has been modified; please apply your changes to "
                                "the latest version and try again");
    }
    updated = body;
  } else if (req.method == http::Method::kPatch) {
    const auto ct = req.headers.get("Content-Type").value_or("");
    updated = stored;
    if (ct == "application/json-patch+json") {
      try {
        updated = stored.patch(body);
      } catch (const json::exception& e) {
        return statusResponse(422, "Invalid", e.what());
      }
    } else {
      updated.merge_patch(body);
    }
    const std::string sentRv = resourceVersionOf(body);
    if (!sentRv.empty() && sentRv != resourceVersionOf(stored)) {
      return statusResponse(409, "Conflict", "the object has been modified");
    }
  } else {
    return statusResponse(405, "MethodNotAllowed", "method not allowed");
  }
  json result = stored;
  if (t.subresource == "status") {
    result["status"] = updated.value("status", json::object());
  } else if (!t.subresource.empty()) {
    return statusResponse(404, "NotFound", "no subresource " + t.subresource);
  } else {
    result = updated;
    // Fields the server owns.
    for (const char* f : {"uid", "creationTimestamp", "namespace", "name"}) {
      result["metadata"][f] = stored["metadata"][f];
    }
    if (stored.contains("status")) {
      result["status"] = stored["status"];
    } else {
      result.erase("status");
    }
    if (result.value("spec", json()) != stored.value("spec", json())) {
      result["metadata"]["generation"] = stored["metadata"].value("generation", 1) + 1;
    } else {
      result["metadata"]["generation"] = stored["metadata"].value("generation", 1);
    }
  }
  if (result == stored) return jsonResponse(200, stored.dump());  // a no-op write keeps its version
  if (auto dry = t.query.find("dryRun"); dry != t.query.end() && dry->second == "All") {
    return jsonResponse(200, result.dump());  // what it would store, stored nowhere
  }
  ++rv_;
  result["metadata"]["resourceVersion"] = std::to_string(rv_);
  stored = result;
  record("MODIFIED", t.collection, result);
  return jsonResponse(200, result.dump());
}

StatusOr<std::unique_ptr<http::ResponseStream>> FakeApiServer::openStream(http::Request request) {
  if (auto answer = arrive(request)) {
    if (!answer->ok()) return answer->status();
    auto s = std::make_shared<FakeStream>((*answer)->status, (*answer)->body);
    return streamHandle(std::move(s));
  }
  std::lock_guard lock(mu_);
  Target t = parseTarget(request.target);
  if (!t.ok || t.query["watch"] != "true" || !t.name.empty()) {
    auto s =
        std::make_shared<FakeStream>(400, statusResponse(400, "BadRequest", "not a watch").body);
    return streamHandle(std::move(s));
  }
  auto stream = std::make_shared<FakeStream>(200, "");
  std::uint64_t from = 0;
  if (auto rv = t.query.find("resourceVersion"); rv != t.query.end() && !rv->second.empty()) {
    from = std::stoull(rv->second);
  }
  Watcher w{t.collection, t.ns, t.query["labelSelector"], t.query["fieldSelector"], stream};
  if (from != 0 && from < compactedBelow_) {
    stream->write(json{{"type", "ERROR"},
                       {"object",
                        {{"kind", "Status"},
                         {"apiVersion", "v1"},
                         {"status", "Failure"},
                         {"message", "too old resource version: " + std::to_string(from) + " (" +
                                         std::to_string(compactedBelow_) + ")"},
                         {"reason", "Expired"},
                         {"code", 410}}}}
                      .dump() +
                  "\n");
    stream->end();
    return streamHandle(std::move(stream));
  }
  if (from == 0) {
    // No version: the current state as ADDED events, then changes.
    for (const auto& [k, obj] : objects_[t.collection]) {
      if (!t.ns.empty() && namespaceOf(obj) != t.ns) continue;
      stream->write(json{{"type", "ADDED"}, {"object", obj}}.dump() + "\n");
    }
  } else {
    for (const auto& e : history_) {
      if (e.rv <= from || e.collection != t.collection) continue;
      if (!t.ns.empty() && namespaceOf(e.object) != t.ns) continue;
      if (!w.labelSelector.empty() &&
          !matchesLabelSelector(e.object["metadata"].value("labels", json::object()),
                                w.labelSelector)) {
        continue;
      }
      if (!w.fieldSelector.empty() && !matchesFieldSelector(e.object, w.fieldSelector)) continue;
      stream->write(json{{"type", e.type}, {"object", e.object}}.dump() + "\n");
    }
  }
  watchers_.push_back(std::move(w));
  return streamHandle(std::move(stream));
}

json FakeApiServer::put(const ResourceRef& resource, const json& object) {
  std::lock_guard lock(mu_);
  const std::string c = collectionOf(resource);
  json obj = object;
  ++rv_;
  obj["metadata"]["resourceVersion"] = std::to_string(rv_);
  if (!obj["metadata"].contains("uid")) obj["metadata"]["uid"] = "uid-" + std::to_string(++uid_);
  const std::string key = keyOf(obj);
  const bool existed = objects_[c].count(key) != 0;
  objects_[c][key] = obj;
  record(existed ? "MODIFIED" : "ADDED", c, obj);
  return obj;
}

std::optional<json> FakeApiServer::get(const ResourceRef& resource, const std::string& ns,
                                       const std::string& name) const {
  std::lock_guard lock(mu_);
  auto c = objects_.find(collectionOf(resource));
  if (c == objects_.end()) return std::nullopt;
  auto it = c->second.find(objectKey(ns, name));
  if (it == c->second.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeApiServer::list(const ResourceRef& resource, const std::string& ns) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  auto c = objects_.find(collectionOf(resource));
  if (c == objects_.end()) return out;
  for (const auto& [k, obj] : c->second) {
    if (ns.empty() || namespaceOf(obj) == ns) out.push_back(obj);
  }
  return out;
}

void FakeApiServer::remove(const ResourceRef& resource, const std::string& ns,
                           const std::string& name) {
  std::lock_guard lock(mu_);
  const std::string c = collectionOf(resource);
  auto it = objects_[c].find(objectKey(ns, name));
  if (it == objects_[c].end()) return;
  json gone = it->second;
  ++rv_;
  gone["metadata"]["resourceVersion"] = std::to_string(rv_);
  objects_[c].erase(it);
  record("DELETED", c, gone);
}

void FakeApiServer::compact() {
  std::lock_guard lock(mu_);
  compactedBelow_ = rv_;
  history_.clear();
}

void FakeApiServer::bookmark(const ResourceRef& resource) {
  std::lock_guard lock(mu_);
  const std::string c = collectionOf(resource);
  const std::string line =
      json{{"type", "BOOKMARK"},
           {"object", {{"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}}
          .dump() +
      "\n";
  for (const auto& w : watchers_) {
    if (w.collection == c) w.stream->write(line);
  }
}

void FakeApiServer::endWatches() {
  std::lock_guard lock(mu_);
  for (auto& w : watchers_) w.stream->end();
  watchers_.clear();
}

void FakeApiServer::breakWatches() {
  std::lock_guard lock(mu_);
  for (auto& w : watchers_) w.stream->fail(unavailable("connection reset by peer"));
  watchers_.clear();
}

}  // namespace kshard::kube::testing
