#include "kube/lease_lock.h"

#include <utility>

#include "kube/api_time.h"
#include "kube/object_store.h"

namespace kshard::kube {
namespace {

using nlohmann::json;

std::optional<WallTime> timeField(const json& spec, const char* key) {
  auto it = spec.find(key);
  if (it == spec.end() || !it->is_string()) return std::nullopt;
  auto t = parseTime(it->get<std::string>());
  if (!t.ok()) return std::nullopt;
  return *t;
}

int intField(const json& spec, const char* key) {
  auto it = spec.find(key);
  if (it == spec.end() || !it->is_number_integer()) return 0;
  return it->get<int>();
}

}  // namespace

LeaderElectionRecord leaseRecordFromLease(const json& lease) {
  LeaderElectionRecord r;
  if (!lease.is_object()) return r;
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return r;
  if (auto h = spec->find("holderIdentity"); h != spec->end() && h->is_string()) {
    r.holderIdentity = h->get<std::string>();
  }
  r.leaseDurationSeconds = intField(*spec, "leaseDurationSeconds");
  r.leaseTransitions = intField(*spec, "leaseTransitions");
  r.acquireTime = timeField(*spec, "acquireTime");
  r.renewTime = timeField(*spec, "renewTime");
  return r;
}

json leaseSpecFromRecord(const LeaderElectionRecord& r) {
  json spec = json::object();
  // An empty holder is written as such (client-go's release writes ""), so that readers see
  // the lease as free.
  spec["holderIdentity"] = r.holderIdentity;
  spec["leaseDurationSeconds"] = r.leaseDurationSeconds;
  spec["leaseTransitions"] = r.leaseTransitions;
  if (r.acquireTime) spec["acquireTime"] = formatMicroTime(*r.acquireTime);
  if (r.renewTime) spec["renewTime"] = formatMicroTime(*r.renewTime);
  return spec;
}

LeaseLock::LeaseLock(Client& client, std::string ns, std::string name,
                     std::chrono::milliseconds requestTimeout)
    : client_(client),
      ns_(std::move(ns)),
      name_(std::move(name)),
      requestTimeout_(requestTimeout),
      lease_(std::make_shared<std::optional<json>>()) {}

std::string LeaseLock::describe() const { return objectKey(ns_, name_); }

std::string LeaseLock::resourceVersion() const {
  return *lease_ ? resourceVersionOf(**lease_) : std::string();
}

void LeaseLock::get(RecordCallback done) {
  call(getRequest(resources::kLeases, ns_, name_),
       [cached = lease_, done = std::move(done)](Status s) {
         if (s.ok()) {
           done(leaseRecordFromLease(**cached));
         } else {
           done(std::move(s));
         }
       });
}

void LeaseLock::create(const LeaderElectionRecord& record, DoneCallback done) {
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", name_}, {"namespace", ns_}}},
                {"spec", leaseSpecFromRecord(record)}};
  call(createRequest(resources::kLeases, ns_, std::move(lease)), std::move(done));
}

void LeaseLock::update(const LeaderElectionRecord& record, DoneCallback done) {
  if (!*lease_) {
    done(failedPrecondition("lease " + describe() + " must be read before it is updated"));
    return;
  }
  json lease = **lease_;
  lease["spec"] = leaseSpecFromRecord(record);
  call(updateRequest(resources::kLeases, ns_, std::move(lease)), std::move(done));
}

void LeaseLock::call(ApiRequest req, DoneCallback done) {
  req.timeout = requestTimeout_;
  client_.callAsync(std::move(req),
                    [cached = lease_, done = std::move(done)](StatusOr<json> lease) {
                      if (!lease.ok()) {
                        done(lease.status());
                        return;
                      }
                      *cached = std::move(*lease);
                      done({});
                    });
}

}  // namespace kshard::kube
