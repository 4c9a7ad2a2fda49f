// Takeover: what a replica does first when it becomes the leader of a ShardMap. It reads the map
// fresh (what the previous leader persisted last is the truth), drops the pods of which nothing
// may run any more, bumps the epoch in the write that claims status.manager (epoch rule 3), and
// then asks for a round that re-sends every stored assignment at the new epoch.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "operator/controller_operation.h"

namespace kshard::manager {

class Takeover : public ControllerOperation {
 public:
  using ControllerOperation::ControllerOperation;

  // The takeover as an operation of the queue, at its front.
  void enqueue();
  // Runs it; `done` ends the operation.
  void run(std::function<void()> done);

 private:
  void claim(std::map<std::string, Inspection> seen, std::function<void()> done);
  void scheduleRetry();
};

}  // namespace kshard::manager
