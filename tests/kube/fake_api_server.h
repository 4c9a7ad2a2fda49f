// FakeApiServer: an in-memory Kubernetes API server behind the http::Client interface, for unit
// tests of kube/ and of the components built on it. It keeps objects of any resource as JSON with
// the API's semantics where tests depend on them:
//   - resourceVersion from one global counter; uid, creationTimestamp, generation on create;
//   - create -> 409 AlreadyExists; update with a stale metadata.resourceVersion -> 409 Conflict;
//     missing objects -> 404 NotFound; every error body is a metav1.Status;
//   - the status subresource: PUT/PATCH .../status writes only .status, the main resource keeps
//     the stored .status;
//   - merge patch (RFC 7386) and JSON patch (RFC 6902); dryRun=All on updates and patches;
//   - delete with preconditions (uid, resourceVersion);
//   - list with label selectors (=, ==, !=, exists, !exists, in, notin), the field selectors
//     metadata.name and metadata.namespace, limit/continue paging;
//   - watch from a resourceVersion with ADDED/MODIFIED/DELETED events, BOOKMARKs on demand, and
//     410 Gone (an ERROR event) for versions older than compact().
// Requests are answered inline, on the caller's thread. Faults are injected with intercept().
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "http/client.h"
#include "kube/resource.h"
#include "tests/kube/fake_transport.h"

namespace kshard::kube::testing {

class FakeApiServer final : public http::Client {
 public:
  explicit FakeApiServer(const Clock& clock) : clock_(clock) {}

  void send(http::Request request, http::ResponseCallback done) override;
  StatusOr<std::unique_ptr<http::ResponseStream>> openStream(http::Request request) override;

  // Called before the server handles a request; an answer replaces the server's.
  using Interceptor = std::function<std::optional<StatusOr<http::Response>>(const http::Request&)>;
  void intercept(Interceptor interceptor);

  // Direct access for test setup and checks (no HTTP).
  nlohmann::json put(const ResourceRef& resource,
                     const nlohmann::json& object);  // create or replace
  std::optional<nlohmann::json> get(const ResourceRef& resource, const std::string& ns,
                                    const std::string& name) const;
  std::vector<nlohmann::json> list(const ResourceRef& resource, const std::string& ns = "") const;
  void remove(const ResourceRef& resource, const std::string& ns, const std::string& name);

  // Watches starting before this version get 410 Gone.
  void compact();
  // Writes a BOOKMARK at the current version to every open watch of `resource`.
  void bookmark(const ResourceRef& resource);
  // Ends (cleanly) or breaks every open watch.
  void endWatches();
  void breakWatches();
  std::uint64_t resourceVersion() const;
  std::size_t requestCount() const;
  std::vector<http::Request> requests() const;

 private:
  struct Event {
    std::uint64_t rv;
    std::string type;
    std::string collection;  // "g/v/resource"
    nlohmann::json object;
  };
  struct Watcher {
    std::string collection;
    std::string ns;
    std::string labelSelector;
    std::string fieldSelector;
    std::shared_ptr<FakeStream> stream;
  };

  // Records the request; the interceptor's answer, if it has one.
  std::optional<StatusOr<http::Response>> arrive(const http::Request& request);
  http::Response handle(const http::Request& request);
  void record(const std::string& type, const std::string& collection, const nlohmann::json& obj);

  const Clock& clock_;
  mutable std::mutex mu_;
  Interceptor interceptor_;
  std::uint64_t rv_ = 100;
  std::uint64_t compactedBelow_ = 0;
  std::uint64_t uid_ = 0;
  // collection -> key -> object
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;
  std::vector<Event> history_;
  std::vector<Watcher> watchers_;
  std::vector<http::Request> requests_;
};

// Whether `labels` (metadata.labels) match a label selector; false and an error for a
// malformed selector.
bool matchesLabelSelector(const nlohmann::json& labels, const std::string& selector,
                          std::string* error = nullptr);

}  // namespace kshard::kube::testing
