// CounterStore: where the counter example keeps its entities' state between activations: one
// small JSON file per counter in a directory shared by all pods of the app (a hostPath on the
// local cluster, a ReadWriteMany volume on a real one).
//
// Each saved state carries the epoch of the pod that wrote it (kshard's fencing token, the
// Kshard-Epoch header). A save with an epoch older than the stored one is refused: a pod that
// lost the shard can no longer overwrite what the new owner wrote. This is how an app uses the
// epoch with its database.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace kshard::examples {

struct CounterState {
  std::int64_t value = 0;
  std::uint64_t epoch = 0;
};

class CounterStore {
 public:
  explicit CounterStore(std::string directory);

  // The saved state, or a zero state when there is none.
  [[nodiscard]] StatusOr<CounterState> load(const std::string& id) const;
  // Writes atomically (temporary file and rename, under an exclusive lock). FailedPrecondition
  // when the stored epoch is newer than `state.epoch`.
  [[nodiscard]] Status save(const std::string& id, const CounterState& state) const;

 private:
  std::string pathOf(const std::string& id) const;
  std::string directory_;
};

}  // namespace kshard::examples
