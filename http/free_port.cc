#include "http/internal/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kshard::http {

StatusOr<std::uint16_t> pickFreePort(const std::string& host) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    family = AF_INET6;
    length = sizeof(sockaddr_in6);
  } else {
    return invalidArgument("server host must be an IP address: " + host);
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable(std::string("creating a socket: ") + std::strerror(errno));
  Status failure;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    failure = unavailable("binding " + host + ":0: " + std::strerror(errno));
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    failure = unavailable(std::string("reading the bound port: ") + std::strerror(errno));
  }
  ::close(fd);
  if (!failure.ok()) return failure;
  return ntohs(family == AF_INET ? v4->sin_port : v6->sin6_port);
}

}  // namespace kshard::http
