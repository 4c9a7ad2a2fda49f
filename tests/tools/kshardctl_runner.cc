#include "tests/tools/kshardctl_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tools/kshardctl.h"

extern char** environ;

namespace kshard::tools {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A temporary file removed when the test is done with it.
class TempFile {
 public:
  TempFile() {
    std::string pattern = ::testing::TempDir() + "kshardctl-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    EXPECT_GE(fd, 0) << "mkstemp failed";
    if (fd >= 0) ::close(fd);
    path_ = pattern;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

RunResult runInProcess(const std::vector<std::string>& args, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out;
  std::ostringstream err;
  RunResult r;
  r.exitCode = runKshardctl(args, in, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

RunResult runBinary(const std::vector<std::string>& args, const std::string& input) {
  TempFile in;
  TempFile out;
  TempFile err;
  std::ofstream(in.path(), std::ios::binary) << input;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, in.path().c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.path().c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err.path().c_str(), O_WRONLY | O_TRUNC, 0);
  std::vector<std::string> argvStrings = {KSHARDCTL_PATH};
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argvStrings) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, KSHARDCTL_PATH, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  RunResult r;
  EXPECT_EQ(spawned, 0) << "could not start " << KSHARDCTL_PATH;
  if (spawned != 0) return r;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "kshardctl did not exit normally, status " << status;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(out.path());
  r.err = readFile(err.path());
  return r;
}

}  // namespace kshard::tools
