#include "sidecar/topic_delivery.h"

#include <mutex>

#include "protocol/wire.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;

namespace {

// The receipt of the app's answer to its topic callback.
PodReceipt appReceipt(const StatusOr<http::Response>& answer) {
  if (!answer.ok()) {
    if (answer.status().code() == StatusCode::kUnavailable) {
      return PodReceipt::refused(errors::kAppUnavailable,
                                 "the app could not be reached; the publication was not "
                                 "delivered: " +
                                     answer.status().message());
    }
    return PodReceipt::refused(errors::kOutcomeUnknown,
                               "the app took the publication but did not answer (" +
                                   answer.status().message() + "); it may have been handled");
  }
  if (answer->status < 200 || answer->status >= 300) {
    return PodReceipt::refused(errors::kAppRefused, "the app answered the topic callback " +
                                                        std::to_string(answer->status) + ": " +
                                                        answer->body.substr(0, 256));
  }
  PodReceipt r;
  r.accepted = true;
  return r;
}

}  // namespace

TopicDelivery::TopicDelivery(EntityRegistry& registry, TopicHost& host)
    : registry_(registry), host_(host) {}

void TopicDelivery::deliver(std::shared_ptr<const Publication> publication, Done done) {
  if (registry_.draining()) {
    done(PodReceipt::refused(errors::kDraining, "this pod drains: it takes no publication"));
    return;
  }
  if (!registry_.leaseValid()) {
    done(PodReceipt::refused(errors::kLeaseFenced,
                             "this pod's ownership lease was not renewed: it takes no new work"));
    return;
  }
  if (publication->entityType) {
    tellEntities(*publication, std::move(done));
    return;
  }
  host_.deliverTopic(std::move(publication),
                     [done = std::move(done)](StatusOr<http::Response>&& answer) mutable {
                       done(appReceipt(answer));
                     });
}

void TopicDelivery::tellEntities(const Publication& publication, Done done) {
  // The receipt counts every tell's answer. EntityRegistry::deliver answers most before it
  // returns (queued or refused), but a tell for an entity whose record is still being written
  // is answered once it is: the receipt waits for the last answer (the registry answers every
  // tell, within its recorder's deadline).
  struct Count {
    std::mutex mu;
    std::size_t waiting = 1;  // the tells sent and not yet answered, and this function
    PodReceipt receipt;
    Done done;
    void answered(bool refused, bool tell) {
      std::unique_lock lock(mu);
      if (tell) ++(refused ? receipt.entitiesRefused : receipt.entities);
      if (--waiting > 0) return;
      Done d = std::move(done);
      PodReceipt r = receipt;
      lock.unlock();
      d(std::move(r));
    }
  };
  auto count = std::make_shared<Count>();
  count->receipt.accepted = true;
  count->done = std::move(done);
  for (auto& [key, shard] : registry_.activeEntitiesOf(*publication.entityType)) {
    Message m;
    m.key = std::move(key);
    m.shard = shard;
    m.mode = DeliveryMode::kTell;
    m.headers = publication.headers;
    // A copy per entity: the registry holds each tell until its turn. The tell backlog bounds
    // them (maxPendingTellBytes): beyond it the tells are refused, and counted so.
    m.body = publication.body;
    {
      std::lock_guard lock(count->mu);
      ++count->waiting;
    }
    registry_.deliver(std::move(m), [count](DeliveryOutcome&& o) {
      count->answered(o.refusal.has_value(), /*tell=*/true);
    });
  }
  count->answered(false, /*tell=*/false);
}

}  // namespace kshard::sidecar
