// Test helpers for the HTTP adapters: a raw TCP peer (to send what our clients never would) and
// throw-away certificates made with the openssl command line.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "http/factory.h"
#include "tests/support/scratch_dir.h"

namespace kshard::http::testing {

// Names parametrised tests after their backend: "Backends/TransportTest.X/beast".
inline std::string backendTestName(const ::testing::TestParamInfo<Backend>& p) {
  return std::string(backendName(p.param));
}

// A 200 (or `status`) text/plain answer with `body`.
inline Response textResponse(std::string body, int status = 200) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", "text/plain");
  r.body = std::move(body);
  return r;
}

// Sends all of `data` on the connected socket `fd`; false when the peer is gone.
inline bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A socket listening on 127.0.0.1, on a port the kernel picks, with `backlog`; its address in
// `addr`. -1 when any step failed.
inline int listenOnLoopback(int backlog, sockaddr_in& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  addr = sockaddr_in{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// A plain TCP connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  bool send(std::string_view data) { return sendAll(fd_, data); }

  // Reads until `received` contains `marker` (or, with an empty marker, until the peer closes),
  // the peer closes, or `timeout` passes. Returns everything received so far.
  std::string readUntil(std::string_view marker, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (marker.empty() || received_.find(marker) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || closed_) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      received_.append(buf, static_cast<std::size_t>(n));
    }
    return received_;
  }

  // True once a read saw the peer close (EOF or reset).
  bool closedByPeer() const { return closed_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, and a second CA
// that signed neither. Made once per test binary in a temporary directory, removed at exit.
struct TestCerts {
  std::string dir;
  std::string caFile, otherCaFile;
  std::string serverCert, serverKey;
  std::string clientCert, clientKey;
  bool ok = false;

  static const TestCerts& get() {
    static const kshard::testing::ScratchDir scratch("kshard-http-certs");
    static const TestCerts certs = make(scratch.path());
    return certs;
  }

 private:
  static TestCerts make(const std::string& dir) {
    TestCerts c;
    c.dir = dir;
    const std::string d = c.dir + "/";
    c.caFile = d + "ca.crt";
    c.otherCaFile = d + "other-ca.crt";
    c.serverCert = d + "server.crt";
    c.serverKey = d + "server.key";
    c.clientCert = d + "client.crt";
    c.clientKey = d + "client.key";
    std::ofstream(d + "server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                       "basicConstraints=CA:FALSE\n"
                                       "extendedKeyUsage=serverAuth\n";
    std::ofstream(d + "client.ext") << "basicConstraints=CA:FALSE\n"
                                       "extendedKeyUsage=clientAuth\n";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string caExt =
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
    const std::string script =
        "cd " + c.dir + " && " + "openssl req -x509 -days 2" + key + caExt +
        " -keyout ca.key -out ca.crt -subj /CN=kshard-test-ca && " + "openssl req -x509 -days 2" +
        key + caExt + " -keyout other-ca.key -out other-ca.crt -subj /CN=kshard-other-ca && " +
        "openssl req" + key + " -keyout server.key -out server.csr -subj /CN=localhost && " +
        "openssl x509 -req -days 2 -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
        " -extfile server.ext -out server.crt && " +
        "openssl req" + key + " -keyout client.key -out client.csr -subj /CN=kshard-client && " +
        "openssl x509 -req -days 2 -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
        " -extfile client.ext -out client.crt";
    c.ok = std::system((script + " >/dev/null 2>&1").c_str()) == 0;
    return c;
  }
};

}  // namespace kshard::http::testing
