#include "app/http_server.hpp"

#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

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

class server_impl;

// -- WebSocket: one per open /v1/users/{user}/events --------------------------

class ws_session : public event_sink,
                   public std::enable_shared_from_this<ws_session> {
public:
  ws_session(tcp::socket&& sock, server_impl& srv, std::string user)
    : ws_(std::move(sock)), srv_(srv), user_(std::move(user)) {
    // nop
  }

  ~ws_session() override;

  void run(http::request<http::string_body> req);

  void push(std::shared_ptr<const std::string> msg) override {
    asio::post(ws_.get_executor(), [self = shared_from_this(), msg] {
      self->enqueue(msg);
    });
  }

  /// Closes once everything queued is sent.
  void close_when_flushed() {
    asio::post(ws_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      if (self->queue_.empty() && self->open_)
        self->do_close(websocket::close_code::going_away);
    });
  }

private:
  void enqueue(std::shared_ptr<const std::string> msg);
  void do_write();
  void do_read();
  void do_close(websocket::close_code code);
  void finished();

  websocket::stream<beast::tcp_stream> ws_;
  server_impl& srv_;
  std::string user_;
  beast::flat_buffer in_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  bool writing_ = false;
  bool open_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool done_ = false;
};

// -- HTTP: one per connection ----------------------------------------------------

class http_session : public std::enable_shared_from_this<http_session> {
public:
  http_session(tcp::socket&& sock, server_impl& srv);
  ~http_session();

  void run() {
    asio::dispatch(stream_.get_executor(),
                   [self = shared_from_this()] { self->do_read(); });
  }

private:
  void do_read();
  void on_read(beast::error_code ec);
  void respond(api_reply r, bool keep_alive);
  bool take_token();

  beast::tcp_stream stream_;
  server_impl& srv_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
};

class server_impl : public http_server {
public:
  server_impl(std::shared_ptr<api_router> router, std::shared_ptr<hub> events,
              server_limits limits, size_t threads)
    : ioc_(static_cast<int>(threads)),
      acceptor_(asio::make_strand(ioc_)),
      router_(std::move(router)),
      events_(std::move(events)),
      limits_(limits),
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
      return failure{errc::store_unavailable,
                     "listen: cannot bind " + host + ":" + std::to_string(port)
                       + ": " + ec.message()};
    port_ = acceptor_.local_endpoint().port();
    do_accept();
    for (size_t i = 0; i < threads_n_; ++i)
      threads_.emplace_back([this] { ioc_.run(); });
    return true;
  }

  uint16_t port() const override {
    return port_;
  }

  void stop_accepting() override {
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
  }

  bool close_websockets(std::chrono::steady_clock::time_point deadline) override {
    std::vector<std::shared_ptr<ws_session>> all;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      for (auto& w : websockets_)
        if (auto s = w.lock())
          all.push_back(std::move(s));
    }
    for (auto& s : all)
      s->close_when_flushed();
    all.clear();
    while (std::chrono::steady_clock::now() < deadline) {
      if (stats_.open_websockets.load() <= 0)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return stats_.open_websockets.load() <= 0;
  }

  void stop() override {
    if (stopped_.exchange(true))
      return;
    stop_accepting();
    ioc_.stop();
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
  }

  const server_stats& stats() const override {
    return stats_;
  }

  // -- for the sessions ----------------------------------------------------

  api_router& router() {
    return *router_;
  }

  hub& events() {
    return *events_;
  }

  const server_limits& limits() const {
    return limits_;
  }

  server_stats& mutable_stats() {
    return stats_;
  }

  void add_ws(const std::shared_ptr<ws_session>& s) {
    std::lock_guard<std::mutex> guard{mtx_};
    websockets_.insert(s);
  }

  void remove_ws(const std::shared_ptr<ws_session>& s) {
    std::lock_guard<std::mutex> guard{mtx_};
    websockets_.erase(s);
  }

private:
  void do_accept() {
    acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec,
                                                           tcp::socket sock) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open())
          return;
        http_log()->warn("accept: {}", ec.message());
      } else if (static_cast<size_t>(stats_.open_connections.load())
                 >= limits_.max_connections) {
        ++stats_.connections_refused;
        beast::error_code ignored;
        sock.close(ignored);
      } else {
        std::make_shared<http_session>(std::move(sock), *this)->run();
      }
      if (acceptor_.is_open())
        do_accept();
    });
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  std::shared_ptr<api_router> router_;
  std::shared_ptr<hub> events_;
  server_limits limits_;
  size_t threads_n_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
  server_stats stats_;
  std::mutex mtx_;
  std::set<std::weak_ptr<ws_session>, std::owner_less<std::weak_ptr<ws_session>>>
    websockets_;
};

// -- http_session ------------------------------------------------------------------

http_session::http_session(tcp::socket&& sock, server_impl& srv)
  : stream_(std::move(sock)), srv_(srv) {
  tokens_ = 2 * srv_.limits().rate; // burst
  refilled_ = std::chrono::steady_clock::now();
  ++srv_.mutable_stats().open_connections;
  beast::error_code ignored;
  stream_.socket().set_option(tcp::no_delay(true), ignored);
}

http_session::~http_session() {
  --srv_.mutable_stats().open_connections;
}

bool http_session::take_token() {
  auto now = std::chrono::steady_clock::now();
  std::chrono::duration<double> dt = now - refilled_;
  refilled_ = now;
  auto cap = 2 * srv_.limits().rate;
  tokens_ = std::min(cap, tokens_ + dt.count() * srv_.limits().rate);
  if (tokens_ < 1)
    return false;
  tokens_ -= 1;
  return true;
}

void http_session::do_read() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(srv_.limits().max_header));
  parser_->body_limit(srv_.limits().max_body);
  stream_.expires_after(std::chrono::milliseconds(srv_.limits().idle_timeout_ms));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->on_read(ec);
                   });
}

void http_session::on_read(beast::error_code ec) {
  if (ec == http::error::end_of_stream) {
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    return;
  }
  if (ec == http::error::body_limit) {
    respond(api_router::error(413, "body_too_large",
                              "the body exceeds "
                                + std::to_string(srv_.limits().max_body)
                                + " bytes"),
            false);
    return;
  }
  if (ec == http::error::header_limit) {
    respond(api_router::error(431, "headers_too_large",
                              "the request head exceeds "
                                + std::to_string(srv_.limits().max_header)
                                + " bytes"),
            false);
    return;
  }
  if (ec)
    return; // timeout, reset, garbage: drop the connection
  auto req = parser_->release();
  auto auth = std::string{req[http::field::authorization]};
  auto target = std::string{req.target()};
  if (websocket::is_upgrade(req)) {
    auto adm = srv_.router().admit_ws(target, auth);
    if (!adm.ok) {
      respond(adm.refusal, false);
      return;
    }
    stream_.expires_never();
    auto ws = std::make_shared<ws_session>(stream_.release_socket(), srv_,
                                           adm.user);
    ws->run(std::move(req));
    return;
  }
  auto keep_alive = req.keep_alive();
  if (!take_token()) {
    ++srv_.mutable_stats().rate_limited;
    respond(api_router::error(429, "rate_limited",
                              "more than "
                                + std::to_string(
                                  static_cast<int>(srv_.limits().rate))
                                + " requests per second on this connection"),
            keep_alive);
    return;
  }
  // Nothing is read while the answer is pending: one request at a time per
  // connection bounds what a client can have in flight.
  stream_.expires_never();
  srv_.router().handle(std::string{req.method_string()}, target, auth,
                       req.body(),
                       [self = shared_from_this(), keep_alive](api_reply r) {
                         asio::post(self->stream_.get_executor(),
                                    [self, keep_alive, r = std::move(r)]() mutable {
                                      self->respond(std::move(r), keep_alive);
                                    });
                       });
}

void http_session::respond(api_reply r, bool keep_alive) {
  auto res = std::make_shared<http::response<http::string_body>>(
    static_cast<http::status>(r.status), 11);
  res->set(http::field::server, "matchd");
  res->set(http::field::content_type, r.content_type);
  res->keep_alive(keep_alive);
  res->body() = std::move(r.body);
  res->prepare_payload();
  stream_.expires_after(std::chrono::milliseconds(srv_.limits().idle_timeout_ms));
  http::async_write(stream_, *res,
                    [self = shared_from_this(), res](beast::error_code ec,
                                                     size_t) {
                      if (ec)
                        return;
                      if (!res->keep_alive()) {
                        self->stream_.socket().shutdown(
                          tcp::socket::shutdown_send, ec);
                        return;
                      }
                      self->do_read();
                    });
}

// -- ws_session --------------------------------------------------------------------

ws_session::~ws_session() {
  // nop
}

void ws_session::run(http::request<http::string_body> req) {
  ++srv_.mutable_stats().open_websockets;
  ws_.set_option(
    websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.read_message_max(4096); // clients only send pings and small text
  ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) {
    if (ec) {
      self->finished();
      return;
    }
    self->open_ = true;
    self->srv_.add_ws(self);
    // Attach after the handshake: the backlog goes out on an open stream.
    self->srv_.events().attach(self->user_, self);
    self->do_read();
    if (self->closing_ && self->queue_.empty())
      self->do_close(websocket::close_code::going_away);
  });
}

void ws_session::enqueue(std::shared_ptr<const std::string> msg) {
  if (done_ || closed_)
    return;
  if (queue_.size() >= srv_.limits().ws_queue_limit) {
    // The client does not read: drop it rather than buffer without bound.
    ++srv_.mutable_stats().ws_overflow_closed;
    queue_.clear();
    do_close(websocket::close_code::policy_error);
    return;
  }
  queue_.push_back(std::move(msg));
  if (open_ && !writing_)
    do_write();
}

void ws_session::do_write() {
  if (queue_.empty() || closed_) {
    writing_ = false;
    if (closing_ && open_ && !closed_)
      do_close(websocket::close_code::going_away);
    return;
  }
  writing_ = true;
  auto msg = queue_.front();
  ws_.text(true);
  ws_.async_write(asio::buffer(*msg),
                  [self = shared_from_this(), msg](beast::error_code ec, size_t) {
                    if (ec) {
                      self->writing_ = false;
                      self->finished();
                      return;
                    }
                    self->queue_.pop_front();
                    self->do_write();
                  });
}

void ws_session::do_read() {
  ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) {
      self->finished();
      return;
    }
    self->in_.clear(); // client messages are ignored
    self->do_read();
  });
}

void ws_session::do_close(websocket::close_code code) {
  if (closed_ || !open_)
    return;
  closed_ = true;
  ws_.async_close(code, [self = shared_from_this()](beast::error_code) {
    self->finished();
  });
}

void ws_session::finished() {
  if (done_)
    return;
  done_ = true;
  srv_.events().detach(user_, this);
  srv_.remove_ws(shared_from_this());
  --srv_.mutable_stats().open_websockets;
}

} // namespace

http_server::~http_server() {
  // nop
}

outcome<std::unique_ptr<http_server>>
http_server::start(const std::string& host, uint16_t port, size_t io_threads,
                   std::shared_ptr<api_router> router, std::shared_ptr<hub> events,
                   server_limits limits) {
  auto srv = std::make_unique<server_impl>(std::move(router), std::move(events),
                                           limits, std::max<size_t>(1, io_threads));
  auto res = srv->bind(host, port);
  if (!res)
    return res.error();
  return std::unique_ptr<http_server>{std::move(srv)};
}

} // namespace mm
