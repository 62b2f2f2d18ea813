#pragma once

// A raw TCP client for tests that must send what a well-behaved HTTP client
// never would: invalid bytes, garbage, WebSocket frames by hand, or
// nothing at all (a peer that does not answer).

#include <cctype>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mm::test {

/// One HTTP response as read off the wire.
struct raw_response {
  unsigned status = 0;
  std::string head; ///< status line and headers
  std::string body;
};

class raw_conn {
 public:
  /// Connects to 127.0.0.1:`port`; throws when that fails.
  explicit raw_conn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0)
      throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error("connect() failed");
    }
  }

  ~raw_conn() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  raw_conn(const raw_conn&) = delete;
  raw_conn& operator=(const raw_conn&) = delete;

  /// Sends all of `bytes`; false when the peer is gone.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  /// Reads one response (head, then Content-Length bytes of body) within
  /// `timeout`; nothing when it did not come whole.
  std::optional<raw_response> read_response(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t end = std::string::npos;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline))
        return std::nullopt;
    raw_response r;
    r.head = in_.substr(0, end + 2);
    auto sp = r.head.find(' ');
    if (sp == std::string::npos)
      return std::nullopt;
    r.status = static_cast<unsigned>(std::stoul(r.head.substr(sp + 1, 3)));
    size_t len = 0;
    auto lower = r.head;
    for (auto& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (auto cl = lower.find("\r\ncontent-length:"); cl != std::string::npos)
      len = std::stoul(lower.substr(cl + 17));
    while (in_.size() < end + 4 + len)
      if (!fill(deadline))
        return std::nullopt;
    r.body = in_.substr(end + 4, len);
    in_.erase(0, end + 4 + len);
    return r;
  }

  /// Reads (and keeps) whatever arrives until the peer closes; true when it
  /// closed within `timeout`.
  bool closed_within(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_)
      if (!fill(deadline))
        return eof_;
    return true;
  }

  /// What was read and not consumed by `read_response`.
  const std::string& pending() const {
    return in_;
  }

  /// One masked client text frame (RFC 6455; the mask key is zero, which
  /// leaves the payload as it is). `payload` must be shorter than 126.
  static std::string text_frame(const std::string& payload) {
    std::string f;
    f.push_back(static_cast<char>(0x81));
    f.push_back(static_cast<char>(0x80 | payload.size()));
    f.append(4, '\0');
    return f + payload;
  }

  /// A masked client ping frame.
  static std::string ping_frame() {
    std::string f;
    f.push_back(static_cast<char>(0x89));
    f.push_back(static_cast<char>(0x80));
    f.append(4, '\0');
    return f;
  }

  /// A WebSocket upgrade request for `target` with `token`.
  static std::string upgrade_request(const std::string& target,
                                     const std::string& token) {
    std::string req = "GET " + target
                      + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        "Sec-WebSocket-Version: 13\r\n";
    if (!token.empty())
      req += "Authorization: Bearer " + token + "\r\n";
    return req + "\r\n";
  }

 private:
  /// Reads what is there (waiting until `deadline`); false on timeout or
  /// end of stream.
  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (eof_)
      return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      return false;
    char buf[4096];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string in_;
  bool eof_ = false;
};

} // namespace mm::test
