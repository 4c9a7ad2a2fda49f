// The libFuzzer entry point of one harness binary, <name>_fuzz; the harness is chosen at build
// time (KSHARD_FUZZ_TARGET, set per binary in fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_targets.h"

#ifndef KSHARD_FUZZ_TARGET
#error "KSHARD_FUZZ_TARGET must name the harness"
#endif

namespace {

const kshard::fuzz::FuzzTarget& target() {
  static const kshard::fuzz::FuzzTarget* const t = [] {
    const auto* found = kshard::fuzz::findFuzzTarget(KSHARD_FUZZ_TARGET);
    if (found == nullptr) {
      std::fprintf(stderr, "no fuzz harness named %s\n", KSHARD_FUZZ_TARGET);
      std::abort();
    }
    return found;
  }();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return target().run(data, size);
}
