// The fuzz harnesses: one function per parser of outside input, taking the raw bytes a fuzzer
// made up. Each runs the parser and checks the properties its contract promises (round trips,
// agreement with a simple reference, valid UTF-8 in every accepted field), aborting with a message
// when one fails.
//
// The same functions run in two places: in a libFuzzer binary per harness (fuzz/CMakeLists.txt,
// `make fuzz`, `make fuzz-smoke`), and in tests/fuzz/, which replays the committed seed corpora
// (fuzz/corpus/<name>/) and every input that once failed (fuzz/regressions/<name>/) in the normal
// test build, so a crash found once stays fixed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kshard::fuzz {

// A harness: returns 0 (libFuzzer's convention); a failed property aborts.
using FuzzFn = int (*)(const std::uint8_t* data, std::size_t size);

struct FuzzTarget {
  std::string_view name;  // the binary is <name>_fuzz; corpus in fuzz/corpus/<name>/
  FuzzFn run;
  std::string_view what;  // what it feeds and what it checks, for --help and reports
};

// Every harness, in the order of fuzz_targets.cc.
std::span<const FuzzTarget> fuzzTargets();
// The harness called `name`, or nullptr.
const FuzzTarget* findFuzzTarget(std::string_view name);

int fuzzOneAdmissionReview(const std::uint8_t* data, std::size_t size);
int fuzzOneBase64(const std::uint8_t* data, std::size_t size);
int fuzzOneChannelFrame(const std::uint8_t* data, std::size_t size);
int fuzzOneJsonDepth(const std::uint8_t* data, std::size_t size);
int fuzzOneJwt(const std::uint8_t* data, std::size_t size);
int fuzzOneDuration(const std::uint8_t* data, std::size_t size);
int fuzzOneEntityKey(const std::uint8_t* data, std::size_t size);
int fuzzOneHttpHead(const std::uint8_t* data, std::size_t size);
int fuzzOneInjectionConfig(const std::uint8_t* data, std::size_t size);
int fuzzOneKubeApi(const std::uint8_t* data, std::size_t size);
int fuzzOneKubeconfig(const std::uint8_t* data, std::size_t size);
int fuzzOneOptionsYaml(const std::uint8_t* data, std::size_t size);
int fuzzOneRouter(const std::uint8_t* data, std::size_t size);
int fuzzOneShardMapJson(const std::uint8_t* data, std::size_t size);
int fuzzOneShardSet(const std::uint8_t* data, std::size_t size);
int fuzzOneVersion(const std::uint8_t* data, std::size_t size);
int fuzzOneWatchStream(const std::uint8_t* data, std::size_t size);
int fuzzOneWire(const std::uint8_t* data, std::size_t size);

}  // namespace kshard::fuzz
