// TopicPublisher: sends one publication of this pod's app to every pod of the ShardMap, at most
// once each, in parallel, and sums up what each pod made of it.
//
// The pods are those of the routing view when the app publishes (the registered pods; this one
// among them gets it through TopicDelivery directly, without the network). For each other pod,
// the publication goes to its sidecar's peer API (POST /v1/peer/topics/{topic}); a send is tried
// again, with the router's backoff (sidecar/retry_schedule.h) until spec.sendTimeout, only while
// it surely did not go out: the pod could not be reached, or refused this sidecar's credentials.
// Once a request to a pod may have gone out, it is never sent again: a broken exchange or no
// answer in time is that pod's OutcomeUnknown. Before each retry the pod is looked up again: one
// that left the map meanwhile (or came back as another pod) is PodLeft, and an address it
// changed to (its sidecar restarted) is used.
//
// The answer comes at the latest at spec.sendTimeout after the publish: a pod that has not
// answered by then (this pod's own app included) is OutcomeUnknown.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/log_throttle.h"
#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/unique_function.h"
#include "sidecar/peer_client.h"
#include "sidecar/publication.h"
#include "sidecar/retry_schedule.h"
#include "sidecar/routing_table.h"
#include "sidecar/sidecar_metrics.h"
#include "sidecar/topic_delivery.h"

namespace kshard::sidecar {

struct TopicPublisherOptions {
  std::string selfPod;  // this pod's name
  Duration initialBackoff = std::chrono::milliseconds(10);
  Duration maxBackoff = std::chrono::milliseconds(500);
};

// What a publish came to: the pods it was sent to, those that accepted it, and why the others
// did not.
struct PublishSummary {
  struct Failure {
    std::string pod;
    std::string code;  // PodReceipt::code
    std::string message;
  };
  std::size_t pods = 0;
  std::size_t accepted = 0;
  std::size_t entities = 0;         // summed over the pods that accepted
  std::size_t entitiesRefused = 0;  // likewise
  std::vector<Failure> failed;      // by pod name
};

class TopicPublisher {
 public:
  using Done = UniqueFunction<void(PublishSummary&&)>;

  TopicPublisher(RoutingTable& table, TopicDelivery& local, PeerClient& peers,
                 UnhealthyReporter& reporter, Scheduler& scheduler, Random& random,
                 TopicPublisherOptions options, SidecarMetrics& metrics, Logger logger);

  // Sends `publication` to every pod of the current routing view and calls `done` exactly once,
  // when every pod's outcome is known or at `sendTimeout`, whichever comes first.
  void publish(Publication publication, Duration sendTimeout, Done done);

 private:
  struct Fanout;
  struct Send;
  void start(const std::shared_ptr<Send>& s);
  void attempt(const std::shared_ptr<Send>& s);
  void onAnswer(const std::shared_ptr<Send>& s, ForwardResult&& r);
  void retry(const std::shared_ptr<Send>& s, std::string reason);
  // Records the pod's receipt (once: a later one is ignored) and answers when it was the last.
  void settle(const std::shared_ptr<Send>& s, PodReceipt&& receipt);
  static bool settled(const Send& s);
  // At the deadline: every pod without an outcome yet is OutcomeUnknown.
  void expire(const std::shared_ptr<Fanout>& f);
  void finish(const std::shared_ptr<Fanout>& f);

  RoutingTable& table_;
  TopicDelivery& local_;
  PeerClient& peers_;
  UnhealthyReporter& reporter_;
  Scheduler& scheduler_;
  const TopicPublisherOptions options_;
  SidecarMetrics& metrics_;
  Logger log_;
  RetrySchedule schedule_;
  // "topic publication not accepted by every pod": at most one line per 5 s.
  std::mutex failureLogMu_;
  LogThrottle failureLog_{std::chrono::seconds(5)};
};

}  // namespace kshard::sidecar
