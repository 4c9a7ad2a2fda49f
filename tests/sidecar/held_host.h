// HeldHost: a fake app for sidecar tests whose calls are held until the test completes them, so
// in-flight work is observable.
#pragma once

#include <gtest/gtest.h>

#include <deque>

#include "sidecar/entity_registry.h"

namespace kshard::sidecar::testing {

class HeldHost : public EntityHost {
 public:
  struct Delivery {
    Message message;
    Epoch epoch;
    UniqueFunction<void(StatusOr<http::Response>&&)> done;
  };
  struct Stop {
    EntityKey key;
    std::function<void(Status)> done;
    std::uint64_t lastTurn = 0;
  };

  void deliver(Message message, Epoch epoch,
               UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    deliveries.push_back({std::move(message), epoch, std::move(done)});
  }
  void stop(const EntityKey& key, ShardId, std::uint64_t lastTurn,
            std::function<void(Status)> done) override {
    stops.push_back({key, std::move(done), lastTurn});
  }

  // Answers the oldest held delivery with `status` and the message body echoed back.
  void completeDelivery(int status = 200) {
    ASSERT_FALSE(deliveries.empty()) << "no delivery is held at the app";
    Delivery d = std::move(deliveries.front());
    deliveries.pop_front();
    http::Response r;
    r.status = status;
    r.body = d.message.body;
    d.done(std::move(r));
  }
  void completeStop(Status st = {}) {
    ASSERT_FALSE(stops.empty()) << "no stop call is held at the app";
    Stop s = std::move(stops.front());
    stops.pop_front();
    s.done(std::move(st));
  }

  std::deque<Delivery> deliveries;
  std::deque<Stop> stops;
};

}  // namespace kshard::sidecar::testing
