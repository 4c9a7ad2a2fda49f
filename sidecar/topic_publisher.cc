#include "sidecar/topic_publisher.h"

#include <algorithm>

#include "protocol/wire.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;

namespace {

// How a pod's receipt is counted (kshard_sidecar_topic_deliveries_total).
TopicResult resultOf(const PodReceipt& r) {
  if (r.accepted) return TopicResult::kAccepted;
  if (r.code == errors::kOutcomeUnknown) return TopicResult::kUnknown;
  if (r.code == errors::kSendTimeout || r.code == errors::kPodLeft) return TopicResult::kNotSent;
  return TopicResult::kRefused;
}

}  // namespace

// One publish: its pods' outcomes as they come.
struct TopicPublisher::Fanout {
  std::shared_ptr<const Publication> publication;
  SteadyTime start;
  SteadyTime deadline;
  Duration sendTimeout{};
  Scheduler::TaskId expiry = 0;
  std::mutex mu;
  std::size_t open = 0;  // pods without an outcome yet
  PublishSummary summary;
  Done done;
  std::vector<std::shared_ptr<Send>> sends;  // until the answer: what expire() settles
};

// The publication on its way to one pod.
struct TopicPublisher::Send {
  std::shared_ptr<Fanout> fanout;
  RouteOwner pod;  // as last looked up
  Duration step{};
  int attempts = 0;
  std::string lastReason = "no attempt";
  bool settled = false;  // under fanout->mu
};

TopicPublisher::TopicPublisher(RoutingTable& table, TopicDelivery& local, PeerClient& peers,
                               UnhealthyReporter& reporter, Scheduler& scheduler, Random& random,
                               TopicPublisherOptions options, SidecarMetrics& metrics,
                               Logger logger)
    : table_(table),
      local_(local),
      peers_(peers),
      reporter_(reporter),
      scheduler_(scheduler),
      options_(std::move(options)),
      metrics_(metrics),
      log_(std::move(logger)),
      schedule_(random, options_.initialBackoff, options_.maxBackoff) {}

void TopicPublisher::publish(Publication publication, Duration sendTimeout, Done done) {
  metrics_.countPublish();
  auto f = std::make_shared<Fanout>();
  f->publication = std::make_shared<const Publication>(std::move(publication));
  f->start = scheduler_.clock().now();
  f->deadline = f->start + sendTimeout;
  f->sendTimeout = sendTimeout;
  f->done = std::move(done);
  // The pods of the view as it is now: a pod that registers later does not get this one.
  const auto snapshot = table_.snapshot();
  f->summary.pods = snapshot->pods.size();
  f->open = snapshot->pods.size();
  if (f->open == 0) {
    finish(f);
    return;
  }
  for (const RouteOwner& pod : snapshot->pods) {
    auto s = std::make_shared<Send>();
    s->fanout = f;
    s->pod = pod;
    s->step = schedule_.initial();
    f->sends.push_back(std::move(s));
  }
  // Armed before any send starts: an outcome that comes at once may end the publish, which
  // cancels it.
  {
    std::lock_guard lock(f->mu);
    f->expiry = scheduler_.runAfter(sendTimeout, [this, f] { expire(f); });
  }
  // A copy of the list: the last outcome clears f->sends.
  const std::vector<std::shared_ptr<Send>> sends = f->sends;
  for (const auto& s : sends) start(s);
}

void TopicPublisher::start(const std::shared_ptr<Send>& s) {
  if (s->pod.pod != options_.selfPod) {
    attempt(s);
    return;
  }
  // This pod: no network, and nothing that could be retried.
  ++s->attempts;
  local_.deliver(s->fanout->publication,
                 [this, s](PodReceipt&& receipt) { settle(s, std::move(receipt)); });
}

void TopicPublisher::attempt(const std::shared_ptr<Send>& s) {
  ++s->attempts;
  const Duration remaining = s->fanout->deadline - scheduler_.clock().now();
  peers_.publish(s->pod, s->fanout->publication,
                 std::max(remaining, Duration(std::chrono::milliseconds(1))),
                 [this, s](ForwardResult&& r) { onAnswer(s, std::move(r)); });
}

void TopicPublisher::onAnswer(const std::shared_ptr<Send>& s, ForwardResult&& r) {
  const std::string& pod = s->pod.pod;
  switch (r.outcome) {
    case ForwardOutcome::kAnswered:
      settle(s, receiptOfAnswer(r.response));
      return;
    case ForwardOutcome::kNotManaged:
      // Not an answer the topic route gives: the pod refused, and nothing reached its app.
      settle(s, PodReceipt::refused(errors::kEntityNotManagedByThisPod, r.detail));
      return;
    // Surely not sent: tried again until the deadline.
    case ForwardOutcome::kCallerRefused:
      metrics_.countRetry(RetryReason::kCallerRefused);
      retry(s, "pod " + pod + " refused this sidecar: " + r.detail);
      return;
    case ForwardOutcome::kUnreachable:
      metrics_.countRetry(RetryReason::kUnreachable);
      reporter_.reportUnreachable(pod);
      retry(s, "pod " + pod + " unreachable: " + r.detail);
      return;
    // The pod may have taken it: never sent again.
    case ForwardOutcome::kTimedOut:
      settle(s, PodReceipt::refused(errors::kOutcomeUnknown,
                                    "pod " + pod +
                                        " did not answer in time; the publication may have "
                                        "been delivered"));
      return;
    case ForwardOutcome::kFailed:
      settle(s, PodReceipt::refused(errors::kOutcomeUnknown,
                                    "the exchange with pod " + pod + " broke (" + r.detail +
                                        "); the publication may have been delivered"));
      return;
  }
}

void TopicPublisher::retry(const std::shared_ptr<Send>& s, std::string reason) {
  s->lastReason = std::move(reason);
  const Duration wait = schedule_.wait(s->step);
  if (scheduler_.clock().now() + wait >= s->fanout->deadline) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(s->fanout->sendTimeout).count();
    settle(s, PodReceipt::refused(errors::kSendTimeout, "not sent within the send timeout of " +
                                                            std::to_string(ms) + " ms after " +
                                                            std::to_string(s->attempts) +
                                                            " attempts; last: " + s->lastReason));
    return;
  }
  s->step = schedule_.next(s->step);
  scheduler_.runAfter(wait, [this, s] {
    if (settled(*s)) return;  // the deadline came first: the publisher has answered
    // The pod as the view knows it now: gone (or replaced by a pod of the same name), it will
    // not get this publication; at a new address (its sidecar restarted), it is sent there.
    const auto snapshot = table_.snapshot();
    const RouteOwner* now = snapshot->podNamed(s->pod.pod);
    if (now == nullptr || now->uid != s->pod.uid) {
      settle(s, PodReceipt::refused(errors::kPodLeft, "pod " + s->pod.pod +
                                                          " left the ShardMap before the "
                                                          "publication could be sent; last: " +
                                                          s->lastReason));
      return;
    }
    s->pod = *now;
    attempt(s);
  });
}

bool TopicPublisher::settled(const Send& s) {
  std::lock_guard lock(s.fanout->mu);
  return s.settled;
}

void TopicPublisher::settle(const std::shared_ptr<Send>& s, PodReceipt&& receipt) {
  Fanout& f = *s->fanout;
  bool last = false;
  {
    std::lock_guard lock(f.mu);
    if (s->settled) return;  // the deadline came first
    s->settled = true;
    if (receipt.accepted) {
      ++f.summary.accepted;
      f.summary.entities += receipt.entities;
      f.summary.entitiesRefused += receipt.entitiesRefused;
    } else {
      f.summary.failed.push_back({s->pod.pod, receipt.code, receipt.message});
    }
    last = --f.open == 0;
  }
  metrics_.countTopicDelivery(resultOf(receipt));
  if (!last) return;
  scheduler_.cancel(f.expiry);
  finish(s->fanout);
}

void TopicPublisher::expire(const std::shared_ptr<Fanout>& f) {
  std::vector<std::shared_ptr<Send>> sends;
  {
    std::lock_guard lock(f->mu);
    sends = f->sends;
  }
  for (const auto& s : sends) {
    settle(s, PodReceipt::refused(errors::kOutcomeUnknown,
                                  "pod " + s->pod.pod +
                                      " did not answer within the send timeout; the "
                                      "publication may have been delivered"));
  }
}

void TopicPublisher::finish(const std::shared_ptr<Fanout>& f) {
  PublishSummary summary;
  {
    std::lock_guard lock(f->mu);
    summary = std::move(f->summary);
    f->sends.clear();  // each send holds the fanout: the cycle ends here
  }
  std::sort(summary.failed.begin(), summary.failed.end(),
            [](const auto& a, const auto& b) { return a.pod < b.pod; });
  if (!summary.failed.empty()) {
    std::uint64_t publishes = 0;
    {
      std::lock_guard lock(failureLogMu_);
      publishes = failureLog_.occur(scheduler_.clock().now());
    }
    if (publishes > 0) {
      const auto& first = summary.failed.front();
      log_.warn("topic publication not accepted by every pod", {{"topic", f->publication->topic},
                                                                {"pods", summary.pods},
                                                                {"accepted", summary.accepted},
                                                                {"pod", first.pod},
                                                                {"code", first.code},
                                                                {"reason", first.message},
                                                                {"publishes", publishes}});
    }
  }
  f->done(std::move(summary));
}

}  // namespace kshard::sidecar
