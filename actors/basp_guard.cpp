#include "actors/basp_guard.hpp"

#include <array>
#include <atomic>
#include <thread>

#include <boost/asio.hpp>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include <spdlog/spdlog.h>

namespace mm {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

/// BASP's frame header: operation, two padding bytes, flags, payload
/// length, operation data, source and destination actor; integers in
/// network byte order (caf/io/basp/header.hpp).
constexpr size_t header_size = 32;
constexpr uint8_t client_handshake = 0x01;
constexpr uint8_t direct_message = 0x02;
constexpr uint8_t heartbeat = 0x06;

uint64_t be(const uint8_t* p, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i)
    x = (x << 8) | p[i];
  return x;
}

auto guard_log() {
  static auto lg = logger("cluster");
  return lg;
}

/// One peer's connection: the client's socket and ours to CAF.
class link : public std::enable_shared_from_this<link> {
 public:
  link(tcp::socket client, const basp_guard_limits& limits,
       std::atomic<uint64_t>& refused)
    : client_(std::move(client)), upstream_(client_.get_executor()),
      limits_(limits), refused_(refused) {
    // nop
  }

  void start(uint16_t target_port) {
    auto self = shared_from_this();
    upstream_.async_connect(
      tcp::endpoint{asio::ip::make_address_v4("127.0.0.1"), target_port},
      [self](const error_code& ec) {
        if (ec)
          return self->close();
        self->read_header();
        self->pump_down();
      });
  }

  void close() {
    error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
  }

 private:
  /// The rule a frame header must keep; empty when it keeps it.
  const char* check(const uint8_t* h) const {
    auto op = h[0];
    auto len = be(h + 4, 4);
    if (first_ && op != client_handshake)
      return "the first frame is not a client handshake";
    if (op == client_handshake) {
      // Again on a connection when the peer asks for the published actor
      // once more (another remote_actor over the same connection).
      if (be(h + 16, 8) != 0 || be(h + 24, 8) != 0)
        return "a client handshake names actors";
      if (len == 0 || len > limits_.max_handshake)
        return "a client handshake of a length out of bounds";
      return nullptr;
    }
    if (op < direct_message || op > heartbeat)
      return "a server handshake or an unknown operation from a client";
    if (op == heartbeat)
      return len == 0 ? nullptr : "a heartbeat with a payload";
    if (len == 0 || len > limits_.max_payload)
      return "a payload length out of bounds";
    return nullptr;
  }

  void read_header() {
    auto self = shared_from_this();
    asio::async_read(client_, asio::buffer(header_),
                     [self](const error_code& ec, size_t) {
                       if (ec)
                         return self->close();
                       if (auto why = self->check(self->header_.data())) {
                         self->refuse(why, self->header_.data());
                         return;
                       }
                       self->first_ = false;
                       self->left_ = be(self->header_.data() + 4, 4);
                       self->forward(asio::buffer(self->header_));
                     });
  }

  void refuse(const char* why, const uint8_t* h) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    static log_limit limit{5, std::chrono::seconds(10)};
    uint64_t held = 0;
    if (limit.admit(held))
      guard_log()->warn("cluster port: a peer closed for a malformed BASP "
                        "frame (operation {}, payload {} bytes): {}{}",
                        h[0], be(h + 4, 4), why,
                        held ? " (" + std::to_string(held) + " more held back)"
                             : std::string{});
    close();
  }

  /// Writes `what` to CAF, then goes on with the frame's payload.
  void forward(asio::const_buffer what) {
    auto self = shared_from_this();
    asio::async_write(upstream_, what, [self](const error_code& ec, size_t) {
      if (ec)
        return self->close();
      self->read_payload();
    });
  }

  void read_payload() {
    if (left_ == 0) {
      read_header();
      return;
    }
    auto n = std::min<uint64_t>(left_, up_.size());
    auto self = shared_from_this();
    asio::async_read(client_, asio::buffer(up_.data(), n),
                     [self](const error_code& ec, size_t got) {
                       if (ec)
                         return self->close();
                       self->left_ -= got;
                       self->forward(asio::buffer(self->up_.data(), got));
                     });
  }

  /// CAF -> client, unchecked.
  void pump_down() {
    auto self = shared_from_this();
    upstream_.async_read_some(asio::buffer(down_), [self](const error_code& ec,
                                                          size_t got) {
      if (ec)
        return self->close();
      asio::async_write(self->client_, asio::buffer(self->down_.data(), got),
                        [self](const error_code& ec, size_t) {
                          if (ec)
                            return self->close();
                          self->pump_down();
                        });
    });
  }

  tcp::socket client_;
  tcp::socket upstream_;
  const basp_guard_limits& limits_;
  std::atomic<uint64_t>& refused_;
  std::array<uint8_t, header_size> header_{};
  std::array<uint8_t, 16384> up_{};
  std::array<uint8_t, 16384> down_{};
  uint64_t left_ = 0;
  bool first_ = true;
};

class guard_impl : public basp_guard {
 public:
  guard_impl(basp_guard_limits limits, uint16_t target)
    : limits_(limits), target_(target), acceptor_(io_) {
    // nop
  }

  ~guard_impl() override {
    stop();
  }

  bool listen(const std::string& bind, uint16_t port, std::string& error) {
    error_code ec;
    auto addr = asio::ip::make_address(bind.empty() ? "0.0.0.0" : bind, ec);
    if (ec) {
      error = "not an address: " + bind;
      return false;
    }
    tcp::endpoint ep{addr, port};
    acceptor_.open(ep.protocol(), ec);
    if (!ec)
      acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec)
      acceptor_.bind(ep, ec);
    if (!ec)
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      error = ec.message();
      return false;
    }
    port_ = acceptor_.local_endpoint(ec).port();
    accept();
    thread_ = std::thread{[this] { io_.run(); }};
    return true;
  }

  uint16_t port() const noexcept override {
    return port_;
  }

  uint64_t refused() const noexcept override {
    return refused_.load(std::memory_order_relaxed);
  }

  void stop() noexcept override {
    if (!thread_.joinable())
      return;
    io_.stop(); // the links go with their handlers
    thread_.join();
  }

 private:
  void accept() {
    acceptor_.async_accept([this](const error_code& ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted)
        return;
      if (!ec) {
        std::make_shared<link>(std::move(s), limits_, refused_)->start(target_);
        accept();
        return;
      }
      // A failed accept (e.g. at the descriptor limit): try again shortly
      // rather than spin.
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([this](const error_code& ec) {
        if (!ec)
          accept();
      });
    });
  }

  basp_guard_limits limits_;
  uint16_t target_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_{io_};
  uint16_t port_ = 0;
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

} // namespace

std::unique_ptr<basp_guard>
start_basp_guard(const std::string& bind, uint16_t port, uint16_t target_port,
                 basp_guard_limits limits, std::string& error) {
  auto g = std::make_unique<guard_impl>(limits, target_port);
  if (!g->listen(bind, port, error))
    return nullptr;
  return g;
}

} // namespace mm
