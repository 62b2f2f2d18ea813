#pragma once

// A small asynchronous client for the matchd API (docs/api.md) on Boost.Beast:
// a keep-alive HTTP/1.1 connection pool for the JSON routes and a WebSocket
// client for the per-user event stream. Everything runs on the one
// `asio::io_context` it is given; nothing blocks and nothing is thread-safe,
// so each object must only be used from the thread running that context.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/system/error_code.hpp>

namespace mm {

namespace asio = boost::asio;
using error_code = boost::system::error_code;

/// The parts of an `http://host:port` URL that matchctl needs.
struct http_url {
  std::string host;
  std::string port = "80";

  /// The value of the Host header: "host:port".
  std::string host_header() const;
};

/// Parses `http://host[:port][/]` (also `host:port` without a scheme and
/// `[v6addr]:port`). Returns false and sets `err` on anything else, e.g.
/// https or a path.
bool parse_http_url(std::string_view text, http_url& out, std::string& err);

/// A host resolved once, before the io_context runs. Copyable.
struct http_endpoint {
  http_url url;
  asio::ip::tcp::resolver::results_type addresses;
};

/// Resolves `url` synchronously (call it before starting the io threads; a
/// numeric address never touches DNS). Returns false and sets `err` when the
/// name does not resolve.
bool resolve_endpoint(asio::io_context& io, const http_url& url,
                      http_endpoint& out, std::string& err);

/// Percent-encodes everything outside [A-Za-z0-9_.~:@-] so that a value can
/// be one path segment.
std::string path_escape(std::string_view segment);

/// The outcome of one HTTP request: a transport error (`ec` set, `status`
/// 0) or a complete response.
struct http_result {
  error_code ec;
  unsigned status = 0;
  std::string body;

  /// True for a response with a 2xx status.
  bool ok() const noexcept {
    return !ec && status >= 200 && status < 300;
  }
};

using http_callback = std::function<void(http_result&&)>;

struct http_pool_options {
  std::size_t max_connections = 8;
  /// Upper bound for connecting, and for writing a request plus reading its
  /// response.
  std::chrono::milliseconds timeout{15000};
};

/// Keep-alive HTTP/1.1 connections to one host. Requests wait in a FIFO for
/// an idle connection; a new connection is opened while fewer than
/// `max_connections` exist. No pipelining: a connection carries one request
/// at a time. A request that fails on a reused connection before any part of
/// the answer arrived (the server closed an idle connection) is sent again
/// once, on a newly opened connection (the other idle ones are suspect too);
/// every matchd route is idempotent, so a retry cannot do harm. Destroying
/// the pool closes its connections; callbacks still pending then never run.
class http_pool {
 public:
  /// Opens no connection yet; `opts.max_connections` 0 counts as 1.
  http_pool(asio::io_context& io, http_endpoint where, http_pool_options opts);
  /// Closes every connection; callbacks still pending never run.
  ~http_pool();

  http_pool(const http_pool&) = delete;
  http_pool& operator=(const http_pool&) = delete;

  /// Queues a request; `done` is called exactly once, on the io thread (never
  /// from within this call). `authorization` is the whole header value (e.g.
  /// "Bearer v1...."), empty for none; a non-empty `body` is sent as
  /// application/json. Not idempotent: every call sends a request.
  void request(boost::beast::http::verb method, std::string target,
               std::string authorization, std::string body, http_callback done);

  /// Requests queued or on the wire.
  std::size_t pending() const noexcept {
    return pending_;
  }

  /// Open connections (busy, connecting or idle).
  std::size_t connections() const noexcept {
    return open_;
  }

  /// Closes idle connections and fails queued requests with
  /// `operation_aborted`; requests on the wire still complete. Idempotent.
  void shutdown();

  /// `shutdown()`, and requests on the wire fail with `operation_aborted`
  /// too. Idempotent.
  void abort();

  /// The host this pool talks to.
  const http_endpoint& endpoint() const noexcept {
    return where_;
  }

  class connection; // implementation detail, public for the .cpp only

 private:
  friend class connection;

  struct queued {
    boost::beast::http::verb method;
    std::string target;
    std::string authorization;
    std::string body;
    http_callback done;
    bool retried = false;
  };

  /// Hands queued requests to idle connections, then opens one connection
  /// per request still waiting, up to `max_connections`. A retried request
  /// waits for a new connection (an idle one is closed to make room).
  void dispatch();
  /// Answers `q` with `res`: one request less pending.
  void finish(queued&& q, http_result&& res);
  /// `c` is free: it takes the oldest queued request, or waits idle (or is
  /// closed after `shutdown`).
  void on_idle(std::shared_ptr<connection> c);
  /// Forgets the closed connection `c`. Idempotent.
  void on_closed(connection* c);
  /// Puts `q` back at the head of the queue (a retry after a stale
  /// connection).
  void requeue_front(queued&& q);
  /// Answers the oldest queued request with `ec`.
  void fail_front(const error_code& ec);
  /// Answers `q` with operation_aborted from the io loop (never inline:
  /// callers may be inside request() or shutdown()).
  void abort_later(queued&& q);

  asio::io_context& io_;
  http_endpoint where_;
  http_pool_options opts_;
  std::deque<queued> queue_;
  std::vector<std::shared_ptr<connection>> idle_;
  std::vector<std::shared_ptr<connection>> all_; ///< every open connection
  std::size_t open_ = 0;
  std::size_t connecting_ = 0;
  std::size_t pending_ = 0;
  bool shut_down_ = false;
  std::shared_ptr<bool> alive_; ///< connections check it before calling back
};

/// How a WebSocket ended.
struct ws_close_info {
  error_code ec;            ///< transport error, or websocket::error::closed
  bool opened = false;      ///< the handshake had succeeded
  bool by_us = false;       ///< close() or abort() was called first
  uint16_t code = 0;        ///< close code the server sent (0: none)
  std::string reason;       ///< close reason the server sent
  unsigned http_status = 0; ///< status of a refused handshake
  std::string http_body;    ///< body of a refused handshake
};

struct ws_handlers {
  std::function<void()> on_open;
  std::function<void(std::string_view)> on_message;   ///< each text message
  std::function<void(const ws_close_info&)> on_close; ///< called once
};

struct ws_options {
  std::chrono::milliseconds handshake_timeout{10000};
  /// Pings after half this much silence; closes after this much silence.
  std::chrono::milliseconds idle_timeout{20000};
  std::size_t max_message = 1 << 20;
  /// A local IP address to bind before connecting (empty: the kernel's
  /// choice). Each 127.0.0.x has its own ephemeral ports, so a load
  /// generator spreads many sockets over several. The first of the
  /// endpoint's addresses is then the only one tried.
  std::string local_address;
};

/// One WebSocket: connect, upgrade with an Authorization header, read text
/// messages until closed. Create with `std::make_shared` and call `start`;
/// the pending operations keep it alive until `on_close` has run.
class ws_client : public std::enable_shared_from_this<ws_client> {
 public:
  /// `where` must outlive the client; `target` is the path (and query) of
  /// the upgrade request, `authorization` the whole header value or empty.
  /// Connects nothing yet.
  ws_client(asio::io_context& io, const http_endpoint& where,
            std::string target, std::string authorization,
            ws_options opts = {});
  ~ws_client();

  ws_client(const ws_client&) = delete;
  ws_client& operator=(const ws_client&) = delete;

  /// Connects and starts the read loop. Not idempotent: call once.
  void start(ws_handlers handlers);

  /// Sends `text` as one text message after those sent before it; false
  /// (nothing sent) unless open and not closing. Not idempotent.
  bool send(std::string text);

  /// Sends a normal close and lets the read loop end; `on_close` follows.
  /// Idempotent.
  void close();

  /// Drops the TCP connection at once; `on_close` follows. Idempotent.
  void abort();

  /// True between a successful handshake and the end.
  bool is_open() const noexcept;

  struct impl;

 private:
  /// Reads the next message (each text message goes to `on_message`) until
  /// the socket ends.
  void read_next();
  /// The TCP connection is up (or failed): upgrade it.
  void on_connected(const error_code& ec);
  /// Writes the queued messages in order, one at a time.
  void write_next();

  std::unique_ptr<impl> impl_;
};

} // namespace mm
