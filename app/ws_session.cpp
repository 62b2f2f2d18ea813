#include "app/ws_session.hpp"

#include <algorithm>

namespace mm {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

ws_session::ws_session(tcp::socket&& sock, std::shared_ptr<server_core> core,
                       conn_slot conn, ws_slot place)
  : ws_(std::move(sock)),
    core_(std::move(core)),
    conn_(std::move(conn)),
    place_(std::move(place)),
    user_(place_.user()) {
  tokens_ = 2 * core_->limits.ws_rate; // burst
  refilled_ = std::chrono::steady_clock::now();
}

ws_session::~ws_session() {
  // nop: the slots give their places back
}

void ws_session::run(request req) {
  ++core_->stats.open_websockets;
  auto idle = std::chrono::milliseconds(core_->limits.ws_idle_timeout_ms);
  websocket::stream_base::timeout opt{};
  // Bounds writing the upgrade's answer (it fits a fresh socket's buffer)
  // and waiting for the client's answer to our close.
  opt.handshake_timeout = std::min<std::chrono::milliseconds>(
    idle, std::chrono::seconds(2));
  // Beast pings after half of it without a frame from the client, and
  // times out the read after all of it.
  opt.idle_timeout = idle;
  opt.keep_alive_pings = true;
  ws_.set_option(opt);
  ws_.read_message_max(4096); // clients only send pings and small text
  // Pings never reach do_read: they take from the same bucket here.
  ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::ping && !take_token())
      over_rate();
  });
  ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) {
    if (ec) {
      self->finished();
      return;
    }
    try {
      self->open_ = true;
      self->core_->add_ws(self);
      // Attach after the handshake: the backlog goes out on an open stream.
      self->core_->events->attach(self->user_, self);
    } catch (const std::exception& e) {
      self->core_->log_handler_error("websocket attach", e.what());
      self->do_close(websocket::close_code::internal_error);
      self->finished();
      return;
    }
    self->do_read();
    if (self->closing_ && self->queue_.empty())
      self->do_close(websocket::close_code::going_away);
  });
}

void ws_session::push(std::shared_ptr<const std::string> msg) {
  asio::post(ws_.get_executor(),
             [self = shared_from_this(), msg] { self->enqueue(msg); });
}

void ws_session::close_when_flushed() {
  asio::post(ws_.get_executor(), [self = shared_from_this()] {
    self->closing_ = true;
    if (self->queue_.empty() && self->open_)
      self->do_close(websocket::close_code::going_away);
  });
}

bool ws_session::take_token() {
  auto now = std::chrono::steady_clock::now();
  std::chrono::duration<double> dt = now - refilled_;
  refilled_ = now;
  auto rate = core_->limits.ws_rate;
  tokens_ = std::min(2 * rate, tokens_ + dt.count() * rate);
  if (tokens_ < 1)
    return false;
  tokens_ -= 1;
  return true;
}

void ws_session::over_rate() {
  if (over_rate_ || closed_ || done_)
    return;
  over_rate_ = true;
  ++core_->stats.ws_rate_closed;
  // Called inside a read (pings): close once the callback returned.
  asio::post(ws_.get_executor(), [self = shared_from_this()] {
    self->do_close(websocket::close_code::policy_error);
  });
}

void ws_session::enqueue(std::shared_ptr<const std::string> msg) {
  if (done_ || closed_)
    return;
  if (queue_.size() >= core_->limits.ws_queue_limit) {
    // The client does not read: drop it rather than buffer without bound.
    ++core_->stats.ws_overflow_closed;
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
      if (ec == beast::error::timeout)
        ++self->core_->stats.ws_idle_closed; // not even a pong
      self->finished();
      return;
    }
    self->in_.clear(); // client messages are ignored
    if (!self->take_token()) {
      // A flood: the close handshake reads (and drops) what still comes.
      self->over_rate();
      return;
    }
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
  core_->events->detach(user_, this);
  core_->remove_ws(shared_from_this());
  place_.reset(); // the user may open another at once
  --core_->stats.open_websockets;
}

} // namespace mm
