// HeldHost: a fake app for sidecar tests whose calls are held until the test completes them, so
// in-flight work is observable.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

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
  struct Start {
    EntityKey key;
    ShardId shard;
    Epoch epoch;
    std::uint64_t turn;
    StartCallback done;
  };

  void deliver(Message message, Epoch epoch,
               UniqueFunction<void(StatusOr<http::Response>&&)> done) override {
    deliveries.push_back({std::move(message), epoch, std::move(done)});
  }
  void stop(const EntityKey& key, ShardId, std::uint64_t lastTurn,
            std::function<void(Status)> done) override {
    stops.push_back({key, std::move(done), lastTurn});
  }

  void start(const EntityKey& key, ShardId shard, Epoch epoch, std::uint64_t turn,
             StartCallback done) override {
    starts.push_back({key, shard, epoch, turn, std::move(done)});
  }

  // Answers the oldest held start: 200 (with Kshard-Passivate when `passivate`), or `error`.
  void completeStart(Status error = {}, bool passivate = false) {
    ASSERT_FALSE(starts.empty()) << "no start is held at the app";
    Start s = std::move(starts.front());
    starts.pop_front();
    if (!error.ok()) {
      s.done(std::move(error));
      return;
    }
    http::Response r;
    r.status = 200;
    if (passivate) r.headers.set(std::string(protocol::kPassivateHeader), "true");
    s.done(std::move(r));
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
  std::deque<Start> starts;
};

// A message to the counter `id` on `shard`: an ask unless said otherwise.
inline Message msg(const std::string& id, ShardId shard, std::string body = "",
                   DeliveryMode mode = DeliveryMode::kAsk) {
  Message m;
  m.key = {"counter", id};
  m.shard = shard;
  m.mode = mode;
  m.body = std::move(body);
  return m;
}
inline Message tell(const std::string& id, ShardId shard, std::string body = "t") {
  return msg(id, shard, std::move(body), DeliveryMode::kTell);
}

// The outcomes of deliveries, in the order they were answered.
struct Outcomes {
  std::vector<DeliveryOutcome> got;
  EntityRegistry::DeliveryCallback callback() {
    return [this](DeliveryOutcome o) { got.push_back(std::move(o)); };
  }
};

}  // namespace kshard::sidecar::testing
