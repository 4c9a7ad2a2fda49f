// MapSyncStats: how the sidecar's map versions arrived (sidecar/map_sync.h), for its metrics.
#pragma once

#include <cstdint>

namespace kshard::sidecar {

struct MapSyncStats {
  std::uint64_t deltas = 0;        // versions reached by applying changes
  std::uint64_t apiReads = 0;      // ... by reading the object from the API server
  std::uint64_t bytesManager = 0;  // answer bodies from the manager
  std::uint64_t bytesApi = 0;      // answer bodies from the API server (re-encoded: approximate)
};

}  // namespace kshard::sidecar
