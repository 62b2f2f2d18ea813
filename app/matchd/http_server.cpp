#include "app/matchd/http_server.hpp"

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "app/matchd/http_request.hpp"
#include "app/matchd/server_core.hpp"
#include "app/matchd/ws_session.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"

#include <spdlog/spdlog.h>

namespace mm {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

auto http_log() {
  static auto lg = logger("http");
  return lg;
}

// -- HTTP: one per connection ------------------------------------------------

class http_session : public std::enable_shared_from_this<http_session> {
 public:
  http_session(tcp::socket&& sock, std::shared_ptr<server_core> core)
    : stream_(std::move(sock)), core_(std::move(core)), conn_(core_) {
    tokens_ = 2 * core_->limits.rate; // burst
    refilled_ = std::chrono::steady_clock::now();
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
  }

  void run() {
    asio::dispatch(stream_.get_executor(),
                   [self = shared_from_this()] { self->do_read(); });
  }

 private:
  void do_read();
  void on_read(beast::error_code ec);
  void serve(beast::error_code ec);
  void upgrade(http::request<http::string_body>&& req,
               const std::string& target, const std::string& auth);
  void respond(api_reply r, bool keep_alive);
  void fail(const char* where, const char* what);
  bool take_token();

  beast::tcp_stream stream_;
  std::shared_ptr<server_core> core_;
  conn_slot conn_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
  bool handed_off_ = false; ///< the router answers this request
};

bool http_session::take_token() {
  auto now = std::chrono::steady_clock::now();
  std::chrono::duration<double> dt = now - refilled_;
  refilled_ = now;
  auto cap = 2 * core_->limits.rate;
  tokens_ = std::min(cap, tokens_ + dt.count() * core_->limits.rate);
  if (tokens_ < 1)
    return false;
  tokens_ -= 1;
  return true;
}

void http_session::do_read() {
  parser_.emplace();
  front::bound(*parser_, core_->limits);
  handed_off_ = false;
  stream_.expires_after(
    std::chrono::milliseconds(core_->limits.idle_timeout_ms));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->on_read(ec);
                   });
}

// The handler boundary: nothing thrown below leaves it.
void http_session::on_read(beast::error_code ec) {
  try {
    serve(ec);
  } catch (const std::exception& e) {
    fail("request", e.what());
  } catch (...) {
    fail("request", "unknown exception");
  }
}

void http_session::fail(const char* where, const char* what) {
  core_->log_handler_error(where, what);
  if (handed_off_)
    return; // the router answers (api_router::handle answers exactly once)
  try {
    respond(api_router::error(500, "internal",
                              "the request could not be handled"),
            false);
  } catch (...) {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }
}

void http_session::serve(beast::error_code ec) {
  if (ec == http::error::end_of_stream) {
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    return;
  }
  if (auto refusal = front::read_refusal(ec, core_->limits)) {
    respond(std::move(*refusal), false);
    return;
  }
  if (ec)
    return; // timeout, reset, a half-sent request: drop the connection
  auto req = parser_->release();
  if (auto refusal = front::framing_refusal(req)) {
    respond(std::move(*refusal), false); // answered, then closed
    return;
  }
  auto in = front::to_routed(req);
  if (in.upgrade) {
    upgrade(std::move(req), in.target, in.authorization);
    return;
  }
  auto keep_alive = in.keep_alive;
  if (!take_token()) {
    ++core_->stats.rate_limited;
    respond(
      api_router::error(429, "rate_limited",
                        "more than "
                          + std::to_string(static_cast<int>(core_->limits.rate))
                          + " requests per second on this connection"),
      keep_alive);
    return;
  }
  // Nothing is read while the answer is pending: one request at a time per
  // connection bounds what a client can have in flight.
  stream_.expires_never();
  handed_off_ = true;
  core_->router->handle(
    in.method, in.target, in.authorization, in.body,
    [self = shared_from_this(), keep_alive](api_reply r) {
      asio::post(self->stream_.get_executor(),
                 [self, keep_alive, r = std::move(r)]() mutable {
                   try {
                     self->respond(std::move(r), keep_alive);
                   } catch (const std::exception& e) {
                     self->core_->log_handler_error("response", e.what());
                     beast::error_code ignored;
                     self->stream_.socket().close(ignored);
                   }
                 });
    });
}

void http_session::upgrade(http::request<http::string_body>&& req,
                           const std::string& target, const std::string& auth) {
  auto adm = core_->router->admit_ws(target, auth);
  if (!adm.ok) {
    respond(adm.refusal, false);
    return;
  }
  auto place = ws_slot::take(core_, adm.who.user);
  if (!place) {
    ++core_->stats.ws_refused;
    respond(api_router::error(
              429, "too_many_websockets",
              "the user has " + std::to_string(core_->limits.ws_per_user)
                + " WebSockets open on this node (--max-websockets-per-user)"),
            false);
    return;
  }
  stream_.expires_never();
  // The connection keeps its place among --max-connections.
  auto ws = std::make_shared<ws_session>(stream_.release_socket(), core_,
                                         std::move(conn_), std::move(place),
                                         std::move(adm.who));
  ws->run(std::move(req));
}

void http_session::respond(api_reply r, bool keep_alive) {
  auto res = std::make_shared<http::response<http::string_body>>(
    static_cast<http::status>(r.status), 11);
  res->set(http::field::server, "matchd");
  res->set(http::field::content_type, r.content_type);
  for (auto& [name, value] : r.headers)
    res->set(name, value);
  res->keep_alive(keep_alive);
  res->body() = std::move(r.body);
  res->prepare_payload();
  stream_.expires_after(
    std::chrono::milliseconds(core_->limits.idle_timeout_ms));
  http::async_write(
    stream_, *res,
    [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec)
        return;
      if (!res->keep_alive()) {
        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        return;
      }
      self->do_read();
    });
}

// -- the server --------------------------------------------------------------

class server_impl : public http_server {
 public:
  server_impl(std::shared_ptr<api_router> router, std::shared_ptr<hub> events,
              server_limits limits, size_t threads)
    : core_(std::make_shared<server_core>(std::move(router), std::move(events),
                                          limits)),
      ioc_(static_cast<int>(threads)), acceptor_(asio::make_strand(ioc_)),
      accept_timer_(acceptor_.get_executor()), sweep_timer_(ioc_),
      threads_n_(threads) {
    // nop
  }

  ~server_impl() override {
    stop();
  }

  outcome<bool> bind(const std::string& host, uint16_t port) {
    beast::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec)
      return failure{errc::invalid_argument, "listen: bad address " + host};
    tcp::endpoint ep{addr, port};
    acceptor_.open(ep.protocol(), ec);
    if (!ec)
      acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
      acceptor_.bind(ep, ec);
    if (!ec)
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return failure{errc::store_unavailable, "listen: cannot bind " + host
                                                + ":" + std::to_string(port)
                                                + ": " + ec.message()};
    port_ = acceptor_.local_endpoint().port();
    do_accept();
    sweep_timer_.expires_after(sweep_tick());
    sweep_timer_.async_wait([this](beast::error_code ec) { sweep(ec); });
    for (size_t i = 0; i < threads_n_; ++i)
      threads_.emplace_back([this] { run_io(); });
    return true;
  }

  uint16_t port() const override {
    return port_;
  }

  void stop_accepting() override {
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      accept_timer_.cancel();
    });
  }

  bool
  close_websockets(std::chrono::steady_clock::time_point deadline) override {
    for (auto& s : core_->websockets.all())
      s->close_when_flushed();
    while (std::chrono::steady_clock::now() < deadline) {
      if (core_->stats.open_websockets.load() <= 0)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return core_->stats.open_websockets.load() <= 0;
  }

  void stop() override {
    if (stopped_.exchange(true))
      return;
    stop_accepting();
    ioc_.stop();
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
    // WebSockets still open (their clients never answered the close) would
    // outlive the io_context inside the hub: the hub lets go of them now,
    // and they go with the io_context's pending handlers.
    for (auto& s : core_->websockets.all())
      core_->events->detach(s->user(), s.get());
  }

  const server_stats& stats() const override {
    return core_->stats;
  }

 private:
  /// A handler that throws (none should: each session catches at its
  /// boundary) costs a log line, not the io thread or the process.
  void run_io() {
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        core_->log_handler_error("io", e.what());
      } catch (...) {
        core_->log_handler_error("io", "unknown exception");
      }
    }
  }

  /// How often the sweep looks: an eighth of --ws-idle-timeout, at most a
  /// second (a ping goes out at most that late, a dead peer is cut at most
  /// that late).
  std::chrono::milliseconds sweep_tick() const {
    auto idle = std::chrono::milliseconds(core_->limits.ws_idle_timeout_ms);
    return std::clamp<std::chrono::milliseconds>(
      idle / 8, std::chrono::milliseconds(10), std::chrono::seconds(1));
  }

  /// One timer for every WebSocket's keep-alive, instead of Beast's timer
  /// per socket re-armed at each pong (a quarter of an idle node's CPU at
  /// 20,000 sockets; docs/benchmarks.md).
  void sweep(beast::error_code ec) {
    if (ec || stopped_.load())
      return;
    try {
      // Only sockets quiet for half of --ws-idle-timeout need a look.
      auto now = ws_session::steady_ms();
      core_->websockets.visit_quiet(now - core_->limits.ws_idle_timeout_ms / 2,
                                    [now](ws_session& s, int64_t heard) {
                                      s.look(now, heard);
                                    });
    } catch (const std::exception& e) {
      core_->log_handler_error("websocket sweep", e.what());
    }
    sweep_timer_.expires_after(sweep_tick());
    sweep_timer_.async_wait([this](beast::error_code e) { sweep(e); });
  }

  void do_accept() {
    acceptor_.async_accept(asio::make_strand(ioc_),
                           [this](beast::error_code ec, tcp::socket sock) {
                             on_accept(ec, std::move(sock));
                           });
  }

  void on_accept(beast::error_code ec, tcp::socket sock) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open())
        return;
      // Out of descriptors (EMFILE/ENFILE) or memory, accept fails at once
      // and forever: pause, longer each time, until one succeeds. The
      // connections wait in the listen backlog meanwhile.
      pause_ = std::min(std::max(2 * pause_, std::chrono::milliseconds(10)),
                        std::chrono::milliseconds(1000));
      ++core_->stats.accept_paused;
      uint64_t suppressed = 0;
      if (accept_log_.admit(suppressed)) {
        if (suppressed > 0)
          http_log()->warn("accept: {} similar lines suppressed", suppressed);
        http_log()->warn("accept: {}; pausing accepts for {} ms", ec.message(),
                         pause_.count());
      }
      accept_timer_.expires_after(pause_);
      accept_timer_.async_wait([this](beast::error_code tec) {
        if (!tec && acceptor_.is_open())
          do_accept();
      });
      return;
    }
    pause_ = std::chrono::milliseconds(0);
    if (static_cast<size_t>(core_->stats.open_connections.load())
        >= core_->limits.max_connections) {
      ++core_->stats.connections_refused;
      beast::error_code ignored;
      sock.close(ignored);
    } else {
      try {
        std::make_shared<http_session>(std::move(sock), core_)->run();
      } catch (const std::exception& e) {
        core_->log_handler_error("accept", e.what());
      }
    }
    if (acceptor_.is_open())
      do_accept();
  }

  // Declared first, destroyed last: the sessions hold it too.
  std::shared_ptr<server_core> core_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_timer_;
  asio::steady_timer sweep_timer_; ///< the WebSockets' keep-alive
  std::chrono::milliseconds pause_{0};
  log_limit accept_log_{5, std::chrono::seconds(10)};
  size_t threads_n_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
};

} // namespace

http_server::~http_server() {
  // nop
}

outcome<std::unique_ptr<http_server>>
http_server::start(const std::string& host, uint16_t port, size_t io_threads,
                   std::shared_ptr<api_router> router,
                   std::shared_ptr<hub> events, server_limits limits) {
  auto srv = std::make_unique<server_impl>(std::move(router), std::move(events),
                                           limits,
                                           std::max<size_t>(1, io_threads));
  auto res = srv->bind(host, port);
  if (!res)
    return res.error();
  return std::unique_ptr<http_server>{std::move(srv)};
}

} // namespace mm
