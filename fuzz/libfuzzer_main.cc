// The libFuzzer entry point of one harness binary, <name>_fuzz; the harness is chosen at build
// time (KSHARD_FUZZ_TARGET, set per binary in fuzz/CMakeLists.txt).
#include <boost/assert.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// Boost's assertions in the fuzz build (BOOST_ENABLE_ASSERT_HANDLER, CMakeLists.txt). Each stops
// the run as assert() would, except one that is wrong in Boost 1.74's Beast: after a chunked body's
// last chunk ("0\r\n") the parser asks for more bytes, and asserts that the next call brings at
// least five, where one more byte is a valid next call (the code after it handles it, asking for
// more again). Beast fixed the assertion in 2024 (boostorg/beast pull request 2861); the release
// build, without assertions, is not affected.
namespace boost {

void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  if (std::strcmp(expr, "n >= 5") == 0 &&
      std::strstr(file, "boost/beast/http/impl/basic_parser.ipp") != nullptr) {
    return;
  }
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed.\n", file, line, function, expr);
  std::abort();
}

void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file,
                          long line) {
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed: %s\n", file, line, function, expr, msg);
  std::abort();
}

}  // namespace boost

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return target().run(data, size);
}
