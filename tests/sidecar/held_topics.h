// Fakes for the topic tests: a PeerClient and a TopicHost whose calls are held until the test
// completes them, so that publications in flight are observable.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <string>

#include "base/clock.h"
#include "protocol/wire.h"
#include "sidecar/peer_client.h"
#include "sidecar/topic_delivery.h"

namespace kshard::sidecar::testing {

class HeldPublishes : public PeerClient {
 public:
  struct Call {
    RouteOwner pod;
    std::shared_ptr<const Publication> publication;
    Duration timeout;
    PeerClient::ForwardCallback done;
    SteadyTime at;
  };
  explicit HeldPublishes(const Clock& clock) : clock_(clock) {}

  void forward(const RouteOwner&, std::shared_ptr<const Message>, Epoch, Duration,
               PeerClient::ForwardCallback) override {
    ADD_FAILURE() << "a publication was forwarded as an entity message";
  }
  void publish(const RouteOwner& pod, std::shared_ptr<const Publication> publication,
               Duration timeout, PeerClient::ForwardCallback done) override {
    calls.push_back({pod, std::move(publication), timeout, std::move(done), clock_.now()});
  }

  // Completes the held call to `pod` (the oldest, if several) with `outcome`; for kAnswered,
  // with a response of `status` and `body`, and Kshard-Error `code` when not empty.
  void complete(const std::string& pod, ForwardOutcome outcome, int status = 200,
                std::string body = "", const std::string& code = "") {
    for (auto it = calls.begin(); it != calls.end(); ++it) {
      if (it->pod.pod != pod) continue;
      Call c = std::move(*it);
      calls.erase(it);
      ForwardResult r;
      r.outcome = outcome;
      r.response.status = status;
      r.response.body = std::move(body);
      if (!code.empty()) r.response.headers.set(std::string(protocol::kErrorHeader), code);
      r.detail = "test";
      c.done(std::move(r));
      return;
    }
    ADD_FAILURE() << "no publication to " << pod << " is in flight";
  }
  // Accepts the held call to `pod` as a receiving sidecar does, with `entities` tells queued.
  void accept(const std::string& pod, std::size_t entities = 0) {
    complete(pod, ForwardOutcome::kAnswered, 200,
             R"({"pod":")" + pod + R"(","entities":)" + std::to_string(entities) +
                 R"(,"entitiesRefused":0})");
  }
  std::size_t callsTo(const std::string& pod) const {
    std::size_t n = 0;
    for (const auto& c : calls) n += c.pod.pod == pod ? 1 : 0;
    return n;
  }

  std::deque<Call> calls;

 private:
  const Clock& clock_;
};

class HeldTopicHost : public TopicHost {
 public:
  struct Call {
    std::shared_ptr<const Publication> publication;
    UniqueFunction<void(StatusOr<http::Response>&&)> done;
  };
  void deliverTopic(std::shared_ptr<const Publication> publication,
                    UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    calls.push_back({std::move(publication), std::move(done)});
  }
  // Answers the oldest held call with `status`, or with `failure` when it is not OK.
  void complete(int status = 200, Status failure = {}) {
    ASSERT_FALSE(calls.empty()) << "no topic callback is held at the app";
    Call c = std::move(calls.front());
    calls.pop_front();
    if (!failure.ok()) {
      c.done(std::move(failure));
      return;
    }
    http::Response r;
    r.status = status;
    c.done(std::move(r));
  }
  std::deque<Call> calls;
};

}  // namespace kshard::sidecar::testing
