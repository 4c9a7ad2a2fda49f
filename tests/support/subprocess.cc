#include "tests/support/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kshard::testing {

Subprocess::Subprocess(std::vector<std::string> argv, std::map<std::string, std::string> env,
                       std::string logPath)
    : logPath_(std::move(logPath)) {
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos && env.count(kv.substr(0, eq))) continue;
    envStrings.push_back(kv);
  }
  for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const int fd = ::open(logPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + logPath_);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    // The test blocks no signals the child needs, but a test thread might have: reset.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(args[0], args.data(), envp.data());
    std::fprintf(stderr, "execve %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  if (pid_ < 0) throw std::runtime_error("fork failed");
}

Subprocess::~Subprocess() {
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(10));
  }
}

void Subprocess::signal(int sig) {
  if (!exited_) ::kill(pid_, sig);
}

int Subprocess::wait(std::chrono::milliseconds timeout) {
  if (exited_) return exitCode_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      exitCode_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exitCode_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Subprocess::running() { return wait(std::chrono::milliseconds(0)) == -1; }

std::string Subprocess::logTail(std::size_t maxBytes) const {
  std::ifstream in(logPath_);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() > maxBytes ? all.substr(all.size() - maxBytes) : all;
}

namespace {

// Binds a throw-away socket to 127.0.0.1:port (0: any) and returns the port it got, or 0 when the
// port is taken.
std::uint16_t bindLoopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

// The lower end of the kernel's range for outgoing connections' local ports.
int ephemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low ? low : 32768;
}

}  // namespace

std::uint16_t freeLoopbackPort() {
  // Below the ephemeral range: a port bind(0) hands out is one the kernel may give the next
  // outgoing connection of any process before the child binds it ("Address already in use", seen
  // in the sidecar component test). Each process starts at its own offset, and never hands out a
  // port twice.
  static std::mutex mu;
  static std::set<std::uint16_t> given;
  static std::uint32_t next = static_cast<std::uint32_t>(::getpid()) * 7919u;
  constexpr int kLow = 15000;
  const int high = ephemeralLow() - 1;
  std::lock_guard lock(mu);
  if (high - kLow >= 1000) {
    const auto span = static_cast<std::uint32_t>(high - kLow + 1);
    for (std::uint32_t tries = 0; tries < span; ++tries) {
      const auto port = static_cast<std::uint16_t>(kLow + static_cast<int>(next++ % span));
      if (!given.contains(port) && bindLoopback(port) != 0) {
        given.insert(port);
        return port;
      }
    }
  }
  // No room below the ephemeral range: let the kernel choose.
  const std::uint16_t port = bindLoopback(0);
  if (port == 0) throw std::runtime_error("cannot bind a loopback port");
  return port;
}

bool waitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

}  // namespace kshard::testing
