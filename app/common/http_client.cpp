#include "app/common/http_client.hpp"

#include <deque>

#include <algorithm>
#include <optional>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace mm {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

// -- URLs ---------------------------------------------------------------------

std::string http_url::host_header() const {
  if (host.find(':') != std::string::npos) // an IPv6 literal
    return "[" + host + "]:" + port;
  return host + ":" + port;
}

bool parse_http_url(std::string_view text, http_url& out, std::string& err) {
  auto s = text;
  if (s.substr(0, 7) == "http://") {
    s.remove_prefix(7);
  } else if (s.find("://") != std::string_view::npos) {
    err = "only http:// URLs are supported: " + std::string(text);
    return false;
  }
  if (!s.empty() && s.back() == '/')
    s.remove_suffix(1);
  if (s.find('/') != std::string_view::npos) {
    err = "a URL must not have a path: " + std::string(text);
    return false;
  }
  http_url res;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) {
      err = "unterminated [ in URL: " + std::string(text);
      return false;
    }
    res.host = std::string(s.substr(1, close - 1));
    auto rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        err = "bad URL: " + std::string(text);
        return false;
      }
      port = rest.substr(1);
    }
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) {
      res.host = std::string(s);
    } else {
      res.host = std::string(s.substr(0, colon));
      port = s.substr(colon + 1);
    }
  }
  if (res.host.empty()) {
    err = "URL without a host: " + std::string(text);
    return false;
  }
  if (port.data() != nullptr) {
    if (port.empty() || port.size() > 5
        || !std::all_of(port.begin(), port.end(),
                        [](char c) { return c >= '0' && c <= '9'; })
        || std::stoul(std::string(port)) > 65535
        || std::stoul(std::string(port)) == 0) {
      err = "bad port in URL: " + std::string(text);
      return false;
    }
    res.port = std::string(port);
  }
  out = std::move(res);
  return true;
}

bool resolve_endpoint(asio::io_context& io, const http_url& url,
                      http_endpoint& out, std::string& err) {
  tcp::resolver resolver(io);
  error_code ec;
  auto found = resolver.resolve(url.host, url.port, ec);
  if (ec || found.empty()) {
    err = "cannot resolve " + url.host_header() + ": "
          + (ec ? ec.message() : std::string("no address"));
    return false;
  }
  out.url = url;
  out.addresses = std::move(found);
  return true;
}

std::string path_escape(std::string_view segment) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(segment.size());
  for (unsigned char c : segment) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
                 || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '~'
                 || c == ':' || c == '@' || c == '-';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

// -- http_pool::connection ----------------------------------------------------

class http_pool::connection
  : public std::enable_shared_from_this<http_pool::connection> {
 public:
  explicit connection(http_pool& pool)
    : pool_(&pool), alive_(pool.alive_), stream_(pool.io_) {}

  /// Opens the TCP connection; the pool hands it work once it is idle.
  void connect() {
    stream_.expires_after(pool_->opts_.timeout);
    stream_.async_connect(pool_->where_.addresses,
                          [self = shared_from_this()](const error_code& ec,
                                                      const tcp::endpoint&) {
                            self->on_connect(ec);
                          });
  }

  /// Sends `q` and reads its answer.
  void run(queued&& q) {
    current_.emplace(std::move(q));
    req_ = {};
    req_.method(current_->method);
    req_.target(current_->target);
    req_.version(11);
    req_.set(http::field::host, host_);
    if (!current_->authorization.empty())
      req_.set(http::field::authorization, current_->authorization);
    if (!current_->body.empty()) {
      req_.set(http::field::content_type, "application/json");
      req_.body() = current_->body; // a copy: a retry sends it again
    }
    req_.keep_alive(true);
    req_.prepare_payload();
    parser_.emplace();
    parser_->body_limit(8 * 1024 * 1024);
    stream_.expires_after(pool_->opts_.timeout);
    http::async_write(stream_, req_,
                      [self = shared_from_this()](const error_code& ec,
                                                  std::size_t) {
                        self->on_write(ec);
                      });
  }

  void close() {
    closed_ = true;
    stream_.close();
  }

 private:
  void on_connect(const error_code& ec) {
    if (!*alive_)
      return;
    pool_->connecting_--;
    if (ec || closed_) {
      closed_ = true;
      stream_.close();
      pool_->on_closed(this);
      // With no connection at all left, nothing queued can succeed soon.
      // (Counted first: a callback may queue a new request.)
      auto* pool = pool_;
      auto failing = pool->open_ == 0
                       ? pool->queue_.size()
                       : std::min<std::size_t>(1, pool->queue_.size());
      for (; failing > 0 && !pool->queue_.empty(); --failing)
        pool->fail_front(ec ? ec : asio::error::operation_aborted);
      pool->dispatch();
      return;
    }
    stream_.expires_never();
    host_ = pool_->where_.url.host_header();
    error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    pool_->on_idle(shared_from_this());
  }

  void on_write(const error_code& ec) {
    if (!*alive_)
      return;
    if (ec)
      return on_error(ec);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](const error_code& ec,
                                                 std::size_t) {
                       self->on_read(ec);
                     });
  }

  void on_read(const error_code& ec) {
    if (!*alive_)
      return;
    if (ec)
      return on_error(ec);
    stream_.expires_never();
    auto& res = parser_->get();
    http_result out;
    out.status = res.result_int();
    out.body = std::move(res.body());
    bool keep = res.keep_alive() && !closed_;
    auto q = std::move(*current_);
    current_.reset();
    parser_.reset();
    served_++;
    auto* pool = pool_;
    if (keep) {
      pool->on_idle(shared_from_this());
    } else {
      close();
      pool->on_closed(this);
      pool->dispatch();
    }
    pool->finish(std::move(q), std::move(out));
  }

  void on_error(const error_code& ec) {
    auto q = std::move(*current_);
    current_.reset();
    // A reused connection the server had already closed: nothing of the
    // answer arrived, so sending the request again is safe (and idempotent).
    bool stale = served_ > 0 && !parser_->got_some() && !q.retried
                 && ec != beast::error::timeout && !closed_;
    parser_.reset();
    close();
    auto* pool = pool_;
    pool->on_closed(this);
    if (stale) {
      q.retried = true;
      pool->requeue_front(std::move(q));
      pool->dispatch();
      return;
    }
    pool->dispatch();
    http_result out;
    out.ec = ec;
    pool->finish(std::move(q), std::move(out));
  }

  http_pool* pool_;
  std::shared_ptr<bool> alive_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::string host_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::optional<queued> current_;
  unsigned served_ = 0;
  bool closed_ = false;
};

// -- http_pool ----------------------------------------------------------------

http_pool::http_pool(asio::io_context& io, http_endpoint where,
                     http_pool_options opts)
  : io_(io), where_(std::move(where)), opts_(opts),
    alive_(std::make_shared<bool>(true)) {
  if (opts_.max_connections == 0)
    opts_.max_connections = 1;
}

http_pool::~http_pool() {
  *alive_ = false;
  for (auto& c : all_)
    c->close();
}

void http_pool::request(http::verb method, std::string target,
                        std::string authorization, std::string body,
                        http_callback done) {
  pending_++;
  queued q{method, std::move(target), std::move(authorization), std::move(body),
           std::move(done)};
  if (shut_down_) {
    abort_later(std::move(q));
    return;
  }
  queue_.push_back(std::move(q));
  dispatch();
}

void http_pool::dispatch() {
  while (!queue_.empty()) {
    if (!queue_.front().retried && !idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      auto q = std::move(queue_.front());
      queue_.pop_front();
      c->run(std::move(q));
      continue;
    }
    // A retry goes to a fresh connection: the idle ones have been idle as
    // long as the one that turned out closed. Make room if need be.
    if (queue_.front().retried && open_ >= opts_.max_connections
        && !idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      c->close();
      on_closed(c.get());
    }
    break;
  }
  // One new connection per waiting request, up to the limit.
  while (!shut_down_ && queue_.size() > connecting_
         && open_ < opts_.max_connections) {
    auto c = std::make_shared<connection>(*this);
    all_.push_back(c);
    open_++;
    connecting_++;
    c->connect();
  }
}

void http_pool::finish(queued&& q, http_result&& res) {
  pending_--;
  auto done = std::move(q.done);
  if (done)
    done(std::move(res));
}

void http_pool::on_idle(std::shared_ptr<connection> c) {
  if (shut_down_) {
    c->close();
    on_closed(c.get());
    return;
  }
  if (!queue_.empty()) {
    auto q = std::move(queue_.front());
    queue_.pop_front();
    c->run(std::move(q));
    return;
  }
  idle_.push_back(std::move(c));
}

void http_pool::on_closed(connection* c) {
  auto it = std::find_if(all_.begin(), all_.end(),
                         [c](const auto& x) { return x.get() == c; });
  if (it == all_.end())
    return;
  all_.erase(it);
  open_--;
  auto idle = std::find_if(idle_.begin(), idle_.end(),
                           [c](const auto& x) { return x.get() == c; });
  if (idle != idle_.end())
    idle_.erase(idle);
}

void http_pool::requeue_front(queued&& q) {
  queue_.push_front(std::move(q));
}

void http_pool::fail_front(const error_code& ec) {
  auto q = std::move(queue_.front());
  queue_.pop_front();
  http_result res;
  res.ec = ec;
  finish(std::move(q), std::move(res));
}

void http_pool::abort_later(queued&& q) {
  asio::post(io_, [this, q = std::move(q), alive = alive_]() mutable {
    if (!*alive)
      return;
    http_result res;
    res.ec = asio::error::operation_aborted;
    finish(std::move(q), std::move(res));
  });
}

void http_pool::shutdown() {
  if (shut_down_)
    return;
  shut_down_ = true;
  auto idle = std::move(idle_);
  idle_.clear();
  for (auto& c : idle) {
    c->close();
    on_closed(c.get());
  }
  // Callbacks must not run inside shutdown(): post the failures.
  auto waiting = std::move(queue_);
  queue_.clear();
  for (auto& q : waiting)
    abort_later(std::move(q));
}

void http_pool::abort() {
  shutdown();
  // Closing cancels their pending operations; each fails its request.
  auto busy = all_;
  for (auto& c : busy)
    c->close();
}

// -- ws_client ----------------------------------------------------------------

struct ws_client::impl {
  enum class phase : uint8_t { idle, connecting, handshaking, open, done };

  impl(asio::io_context& io, const http_endpoint& where, std::string target,
       std::string authorization, ws_options opts)
    : ws(io), where(where), target(std::move(target)),
      authorization(std::move(authorization)), opts(opts) {}

  websocket::stream<beast::tcp_stream> ws;
  const http_endpoint& where; // owned by the caller, outlives the run
  std::string target;
  std::string authorization;
  ws_options opts;
  beast::flat_buffer buffer;
  websocket::response_type res;
  ws_handlers handlers;
  phase ph = phase::idle;
  bool by_us = false;
  bool close_sent = false;
  std::deque<std::string> out; ///< messages to send, the front one on the wire
  bool writing = false;
};

ws_client::ws_client(asio::io_context& io, const http_endpoint& where,
                     std::string target, std::string authorization,
                     ws_options opts)
  : impl_(std::make_unique<impl>(io, where, std::move(target),
                                 std::move(authorization), opts)) {}

ws_client::~ws_client() = default;

bool ws_client::is_open() const noexcept {
  return impl_->ph == impl::phase::open;
}

namespace {

// Ends the WebSocket once: reports how and drops the handlers (they may hold
// references that would otherwise keep the client alive).
void ws_finish(ws_client::impl& d, const error_code& ec) {
  if (d.ph == ws_client::impl::phase::done)
    return;
  bool opened = d.ph == ws_client::impl::phase::open;
  d.ph = ws_client::impl::phase::done;
  ws_close_info info;
  info.ec = ec;
  info.opened = opened;
  info.by_us = d.by_us;
  if (opened) {
    info.code = static_cast<uint16_t>(d.ws.reason().code);
    info.reason = std::string(d.ws.reason().reason.c_str());
  } else if (ec == websocket::error::upgrade_declined) {
    info.http_status = d.res.result_int();
    info.http_body = std::move(d.res.body());
  }
  error_code ignored;
  beast::get_lowest_layer(d.ws).socket().close(ignored);
  auto handlers = std::move(d.handlers);
  d.handlers = {};
  if (handlers.on_close)
    handlers.on_close(info);
}

} // namespace

void ws_client::start(ws_handlers handlers) {
  auto& d = *impl_;
  d.handlers = std::move(handlers);
  d.ph = impl::phase::connecting;
  auto& lowest = beast::get_lowest_layer(d.ws);
  lowest.expires_after(d.opts.handshake_timeout);
  auto self = shared_from_this();
  if (d.opts.local_address.empty()) {
    lowest.async_connect(d.where.addresses,
                         [self](const error_code& ec, const tcp::endpoint&) {
                           self->on_connected(ec);
                         });
    return;
  }
  // Bound to the given address: open and bind first, then connect to the
  // first resolved endpoint.
  error_code ec;
  auto to = d.where.addresses.begin()->endpoint();
  auto from = asio::ip::make_address(d.opts.local_address, ec);
  if (!ec)
    lowest.socket().open(to.protocol(), ec);
  if (!ec)
    lowest.socket().bind(tcp::endpoint{from, 0}, ec);
  if (ec) {
    // Reported from the loop, as a failed connect would be.
    asio::post(lowest.get_executor(), [self, ec] { self->on_connected(ec); });
    return;
  }
  lowest.async_connect(to, [self](const error_code& ec) {
    self->on_connected(ec);
  });
}

void ws_client::on_connected(const error_code& ec) {
  auto& d = *impl_;
  if (d.ph == impl::phase::done)
    return;
  if (ec || d.by_us)
    return ws_finish(d, ec ? ec : asio::error::operation_aborted);
  auto& lowest = beast::get_lowest_layer(d.ws);
  error_code ignored;
  lowest.socket().set_option(tcp::no_delay(true), ignored);
  // From here on the websocket stream keeps its own timeouts.
  lowest.expires_never();
  websocket::stream_base::timeout t;
  t.handshake_timeout = d.opts.handshake_timeout;
  t.idle_timeout = d.opts.idle_timeout;
  t.keep_alive_pings = true;
  d.ws.set_option(t);
  d.ws.set_option(websocket::stream_base::decorator(
    [auth = d.authorization](websocket::request_type& req) {
      if (!auth.empty())
        req.set(beast::http::field::authorization, auth);
      req.set(beast::http::field::user_agent, "matchctl");
    }));
  d.ws.read_message_max(d.opts.max_message);
  d.ph = impl::phase::handshaking;
  d.ws.async_handshake(d.res, d.where.url.host_header(), d.target,
                       [self = shared_from_this()](const error_code& ec) {
                         auto& d = *self->impl_;
                         if (d.ph == impl::phase::done)
                           return;
                         if (ec || d.by_us)
                           return ws_finish(
                             d, ec ? ec : asio::error::operation_aborted);
                         d.ph = impl::phase::open;
                         d.res = {}; // the handshake answer is no longer needed
                         self->read_next();
                         if (d.handlers.on_open)
                           d.handlers.on_open();
                       });
}

void ws_client::read_next() {
  auto& d = *impl_;
  d.ws.async_read(d.buffer, [self = shared_from_this()](const error_code& ec,
                                                        std::size_t) {
    auto& d = *self->impl_;
    if (d.ph == impl::phase::done)
      return;
    if (ec)
      return ws_finish(d, ec);
    if (d.ws.got_text() && d.handlers.on_message) {
      auto data = d.buffer.cdata();
      d.handlers.on_message(
        std::string_view(static_cast<const char*>(data.data()), data.size()));
    }
    d.buffer.consume(d.buffer.size());
    if (d.ph == impl::phase::open)
      self->read_next();
  });
}

bool ws_client::send(std::string text) {
  auto& d = *impl_;
  if (d.ph != impl::phase::open || d.close_sent)
    return false;
  d.out.push_back(std::move(text));
  if (!d.writing)
    write_next();
  return true;
}

void ws_client::write_next() {
  auto& d = *impl_;
  if (d.out.empty() || d.ph != impl::phase::open) {
    d.writing = false;
    return;
  }
  d.writing = true;
  d.ws.text(true);
  d.ws.async_write(asio::buffer(d.out.front()),
                   [self = shared_from_this()](const error_code& ec,
                                               std::size_t) {
                     auto& d = *self->impl_;
                     if (ec) {
                       d.writing = false;
                       return ws_finish(d, ec);
                     }
                     d.out.pop_front();
                     self->write_next();
                   });
}

void ws_client::close() {
  auto& d = *impl_;
  switch (d.ph) {
    case impl::phase::idle:
    case impl::phase::done:
      return;
    case impl::phase::connecting:
    case impl::phase::handshaking:
      d.by_us = true;
      beast::get_lowest_layer(d.ws).cancel();
      return;
    case impl::phase::open:
      if (d.close_sent)
        return;
      d.by_us = true;
      d.close_sent = true;
      // The pending read completes with `closed` once the server answers.
      d.ws.async_close(websocket::close_code::normal,
                       [self = shared_from_this()](const error_code& ec) {
                         if (ec)
                           ws_finish(*self->impl_, ec);
                       });
      return;
  }
}

void ws_client::abort() {
  auto& d = *impl_;
  if (d.ph == impl::phase::done || d.ph == impl::phase::idle)
    return;
  d.by_us = true;
  error_code ignored;
  beast::get_lowest_layer(d.ws).socket().close(ignored);
}

} // namespace mm
