// Replays every committed input of every fuzz harness (fuzz/fuzz_targets.h): the seed corpora in
// fuzz/corpus/<name>/ and the inputs that once failed in fuzz/regressions/<name>/. A broken
// property aborts the test binary with the property's name; ctest reports that harness's case.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace kshard::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = KSHARD_FUZZ_DIR;

std::vector<fs::path> filesUnder(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `target` on each file; returns how many ran.
std::size_t replay(const FuzzTarget& target, const fs::path& dir) {
  std::size_t count = 0;
  for (const fs::path& file : filesUnder(dir)) {
    SCOPED_TRACE(file.string());
    const std::string bytes = readAll(file);
    EXPECT_EQ(target.run(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
    ++count;
  }
  return count;
}

class FuzzReplayTest : public ::testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzReplayTest, SeedCorpusAndRegressionsHoldEveryProperty) {
  const FuzzTarget& target = GetParam();
  const std::size_t seeds = replay(target, kFuzzDir / "corpus" / std::string(target.name));
  EXPECT_GT(seeds, 0u) << "fuzz/corpus/" << target.name << "/ has no seed inputs";
  replay(target, kFuzzDir / "regressions" / std::string(target.name));
}

TEST_P(FuzzReplayTest, EmptyAndTinyInputsAreHandled) {
  const FuzzTarget& target = GetParam();
  EXPECT_EQ(target.run(nullptr, 0), 0);
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<std::uint8_t>(b);
    EXPECT_EQ(target.run(&byte, 1), 0);
  }
}

std::string harnessName(const ::testing::TestParamInfo<FuzzTarget>& param) {
  return std::string(param.param.name);
}

INSTANTIATE_TEST_SUITE_P(AllHarnesses, FuzzReplayTest,
                         ::testing::ValuesIn(fuzzTargets().begin(), fuzzTargets().end()),
                         harnessName);

// A corpus or regression folder whose name matches no harness would never be replayed.
TEST(FuzzReplayLayoutTest, EveryInputFolderBelongsToAHarness) {
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path root = kFuzzDir / kind;
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::directory_iterator(root)) {
      if (!entry.is_directory()) continue;
      const std::string name = entry.path().filename().string();
      EXPECT_NE(findFuzzTarget(name), nullptr)
          << "fuzz/" << kind << "/" << name << " names no harness in fuzz/fuzz_targets.cc";
    }
  }
}

}  // namespace
}  // namespace kshard::fuzz
