// SeenEvents: an informer handler that records what it is told as strings, for tests:
//   "add a@1 initial", "add c@13", "update a 1->11", "delete b@12", "delete c@3 unknown"
// where the part after '@' (and the versions of an update) come from `version` (by default the
// resourceVersion). Thread-safe; waits are on real time with a deadline.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "kube/informer.h"

namespace kshard::kube::testing {

class SeenEvents {
 public:
  using Version = std::function<std::string(const nlohmann::json&)>;
  explicit SeenEvents(Version version = resourceVersionOf) : version_(std::move(version)) {}

  InformerHandler handler() {
    return {
        .onAdd =
            [this](const nlohmann::json& o, bool initial) {
              push("add " + nameOf(o) + "@" + version_(o) + (initial ? " initial" : ""));
            },
        .onUpdate =
            [this](const nlohmann::json& before, const nlohmann::json& after) {
              push("update " + nameOf(after) + " " + version_(before) + "->" + version_(after));
            },
        .onDelete =
            [this](const nlohmann::json& last, bool unknown) {
              push("delete " + nameOf(last) + "@" + version_(last) + (unknown ? " unknown" : ""));
            },
    };
  }

  // Waits until at least `n` events were seen (failing the test at the deadline) and returns all.
  std::vector<std::string> waitFor(std::size_t n,
                                   std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    const bool ok = cv_.wait_for(lock, limit, [&] { return events_.size() >= n; });
    EXPECT_TRUE(ok) << "handlers saw " << events_.size() << " events, expected " << n;
    return events_;
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  void push(std::string e) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }

  Version version_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

}  // namespace kshard::kube::testing
