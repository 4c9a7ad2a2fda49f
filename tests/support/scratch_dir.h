// ScratchDir: a fresh directory under /tmp for one test or fixture, removed with everything in it
// when the ScratchDir is destroyed, so that a test run leaves nothing behind. Declare it before
// the members that write into it: members are destroyed in reverse order, so they are gone (their
// files closed, their servers stopped) before the directory is removed.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kshard::testing {

class ScratchDir {
 public:
  // `prefix` names the directory, e.g. "counter-store" gives /tmp/counter-store-XXXXXX.
  explicit ScratchDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + tmpl + " failed");
    }
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kshard::testing
