#pragma once

// Loopback ports for tests (the C++ side of free_port.sh).

#include <cstdint>
#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mm::test {

/// A loopback port nobody listens on: bound once, then released.
inline uint16_t free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("free_tcp_port: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("free_tcp_port: bind failed");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// True when something accepts connections on loopback `port`.
inline bool port_open(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  auto ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
            == 0;
  ::close(fd);
  return ok;
}

} // namespace mm::test
