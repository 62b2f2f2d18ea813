#pragma once

// The HTTP/1.1 + WebSocket front of matchd (Boost.Beast, kept out of this
// header). Requests go to an `api_router`; WebSockets become event sinks of
// the `hub`.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "app/matchd/api.hpp"
#include "app/matchd/hub.hpp"

namespace mm {

/// Bounds that keep a slow or abusive client from exhausting the node.
struct server_limits {
  size_t max_body = 16384;          ///< bytes of one request body
  size_t max_header = 8192;         ///< bytes of one request head
  double rate = 1000;               ///< requests per second per connection
  uint32_t idle_timeout_ms = 30000; ///< no complete request: close
  size_t max_connections = 20000;   ///< open at once (HTTP + WebSocket)
  size_t ws_queue_limit = 256;      ///< unsent messages before closing
  uint32_t ws_per_user = 8;         ///< WebSockets of one user at once
  /// A WebSocket from which nothing (not even a pong to the server's ping,
  /// sent at half this) arrives for this long is closed.
  uint32_t ws_idle_timeout_ms = 60000;
  double ws_rate = 10; ///< inbound messages and pings per second (burst 2x)
  /// Requests of one WebSocket being answered at once; one more is refused
  /// 429 too_many_requests on the socket.
  size_t ws_requests_in_flight = 32;
};

/// Counters of the transport, read by /metrics.
struct server_stats {
  std::atomic<uint64_t> connections_refused{0};
  std::atomic<uint64_t> rate_limited{0};
  std::atomic<uint64_t> ws_overflow_closed{0};
  std::atomic<uint64_t> ws_refused{0};     ///< upgrades over the per-user cap
  std::atomic<uint64_t> ws_idle_closed{0}; ///< closed by the idle timeout
  std::atomic<uint64_t> ws_pings{0};       ///< pings sent to silent clients
  std::atomic<uint64_t> ws_rate_closed{0}; ///< closed for flooding
  std::atomic<uint64_t> ws_requests{0};    ///< requests sent on WebSockets
  std::atomic<uint64_t> accept_paused{0};  ///< accept failures (then a pause)
  std::atomic<uint64_t> handler_errors{0}; ///< exceptions caught in handlers
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> open_websockets{0};
};

/// The listening server: one io_context on its own threads.
class http_server {
 public:
  /// Binds `host:port` (port 0: any free port) and serves on `io_threads`
  /// threads (at least one). Fails with `invalid_argument` for a bad
  /// address and `store_unavailable` when the address cannot be bound. Not
  /// idempotent.
  static outcome<std::unique_ptr<http_server>>
  start(const std::string& host, uint16_t port, size_t io_threads,
        std::shared_ptr<api_router> router, std::shared_ptr<hub> events,
        server_limits limits);

  /// Stops serving first (`stop`).
  virtual ~http_server();

  /// The bound port.
  virtual uint16_t port() const = 0;

  /// Stops accepting connections; open ones go on. Idempotent.
  virtual void stop_accepting() = 0;

  /// Closes every WebSocket once its queued messages are sent; blocks
  /// until all closed or `deadline` passed, and answers whether all closed
  /// in time. Idempotent.
  virtual bool close_websockets(std::chrono::steady_clock::time_point deadline)
    = 0;

  /// Stops serving and joins the io threads; the hub lets go of this
  /// server's WebSockets. Idempotent.
  virtual void stop() = 0;

  /// The transport's counters, live.
  virtual const server_stats& stats() const = 0;
};

} // namespace mm
