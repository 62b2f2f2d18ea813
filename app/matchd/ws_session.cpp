#include "app/matchd/ws_session.hpp"

#include "app/matchd/ws_requests.hpp"

#include <algorithm>

namespace mm {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

ws_session::ws_session(tcp::socket&& sock, std::shared_ptr<server_core> core,
                       conn_slot conn, ws_slot place, token_check who)
  : ws_(std::move(sock)), core_(std::move(core)), conn_(std::move(conn)),
    place_(std::move(place)), user_(place_.user()), who_(std::move(who)) {
  auto now = std::chrono::steady_clock::now();
  frames_ = {2 * core_->limits.ws_rate, now}; // burst
  requests_ = {2 * core_->limits.rate, now};
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
  opt.handshake_timeout
    = std::min<std::chrono::milliseconds>(idle, std::chrono::seconds(2));
  // No idle timer per socket: the server's sweep pings and cuts (`look`).
  opt.idle_timeout = websocket::stream_base::none();
  opt.keep_alive_pings = false;
  ws_.set_option(opt);
  // A request frame holds at most an HTTP body and a few fields.
  ws_.read_message_max(core_->limits.max_body + 1024);
  // Pings never reach do_read: they take from the same bucket here.
  ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
    heard(); // a pong answers the sweep's ping
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
      self->reg_ = self->core_->websockets.add(self, steady_ms());
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

int64_t ws_session::steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

void ws_session::heard() {
  if (!done_ && reg_.heard != nullptr) // the slot is another's once done
    reg_.heard->store(steady_ms(), std::memory_order_relaxed);
}

void ws_session::look(int64_t now_ms, int64_t at) {
  if (at != heard_for_) {
    heard_for_ = at; // a new silence
    swept_ = 0;
  }
  auto silent = now_ms - at;
  int64_t idle = core_->limits.ws_idle_timeout_ms;
  if (silent >= idle && swept_ < 2) {
    swept_ = 2;
    asio::post(ws_.get_executor(),
               [self = shared_from_this(), at] { self->cut(at); });
  } else if (silent >= idle / 2 && swept_ < 1) {
    swept_ = 1;
    asio::post(ws_.get_executor(),
               [self = shared_from_this()] { self->ping(); });
  }
}

void ws_session::ping() {
  if (!open_ || closed_ || done_ || pinging_)
    return;
  pinging_ = true;
  ++core_->stats.ws_pings;
  ws_.async_ping({}, [self = shared_from_this()](beast::error_code) {
    // A failed ping fails the pending read too: that one ends the session.
    self->pinging_ = false;
  });
}

void ws_session::cut(int64_t heard_at) {
  if (!open_ || closed_ || done_
      || reg_.heard->load(std::memory_order_relaxed) != heard_at)
    return;
  ++core_->stats.ws_idle_closed; // not even a pong
  // Like a timeout: no close handshake with a peer that answers nothing.
  // The pending read fails, and that ends the session.
  beast::get_lowest_layer(ws_).close();
}

bool ws_session::bucket::take(double rate) {
  auto now = std::chrono::steady_clock::now();
  std::chrono::duration<double> dt = now - refilled;
  refilled = now;
  tokens = std::min(2 * rate, tokens + dt.count() * rate);
  if (tokens < 1)
    return false;
  tokens -= 1;
  return true;
}

bool ws_session::take_token() {
  return frames_.take(core_->limits.ws_rate);
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
  ws_.async_write(asio::buffer(*msg), [self = shared_from_this(),
                                       msg](beast::error_code ec, size_t) {
    if (ec) {
      self->writing_ = false;
      self->finished();
      return;
    }
    self->queue_.erase(self->queue_.begin()); // at most ws_queue_limit
    if (self->queue_.empty() && self->queue_.capacity() > 8)
      self->queue_.shrink_to_fit(); // a burst's room back
    self->do_write();
  });
}

void ws_session::do_read() {
  // A waiting read holds no buffer of its own: Beast's async_read prepares
  // ~1.5 KiB in `in_` before a byte arrives, per connected user. The first
  // byte of a message lands in `first_`; `in_` grows only for the rest.
  ws_.async_read_some(
    asio::buffer(&first_, 1),
    [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (self->read_failed(ec))
        return;
      self->heard();
      std::string head(n, self->first_);
      if (self->ws_.is_message_done()) {
        self->on_message(std::move(head));
        return;
      }
      self->ws_.async_read(
        self->in_, [self, head = std::move(head)](beast::error_code e, size_t) {
          if (self->read_failed(e))
            return;
          self->heard();
          auto text = head + beast::buffers_to_string(self->in_.data());
          // Read buffers are per connected user: none kept between requests.
          self->in_.clear();
          self->in_.shrink_to_fit();
          self->on_message(std::move(text));
        });
    });
}

bool ws_session::read_failed(beast::error_code ec) {
  if (!ec)
    return false;
  if (ec == beast::error::timeout)
    ++core_->stats.ws_idle_closed; // the close handshake's answer
  finished();
  return true;
}

void ws_session::on_message(std::string text) {
  try {
    if (!on_request(text)) {
      // A flood: the close handshake reads (and drops) what still comes.
      over_rate();
      return;
    }
  } catch (const std::exception& e) {
    core_->log_handler_error("websocket request", e.what());
  }
  do_read();
}

bool ws_session::on_request(std::string_view text) {
  if (closed_ || done_)
    return true;
  auto req = parse_ws_request(text, user_);
  auto answer = [this](const std::string& id, const api_reply& r) {
    enqueue(std::make_shared<const std::string>(ws_reply_text(id, r)));
  };
  if (req.what == ws_request::kind::refused) {
    // Junk counts against --ws-rate like any other frame.
    if (!take_token())
      return false;
    answer(req.id, req.refusal);
    return true;
  }
  ++core_->stats.ws_requests;
  if (!requests_.take(core_->limits.rate)) {
    ++core_->stats.rate_limited;
    answer(req.id,
           api_router::error(
             429, "rate_limited",
             "more than " + std::to_string(static_cast<int>(core_->limits.rate))
               + " requests per second on this connection"));
    return true;
  }
  switch (req.what) {
    case ws_request::kind::refused:
      return true; // answered above
    case ws_request::kind::auth: {
      // The new token must pass what the upgrade passed, as the same user.
      auto adm = core_->router->admit_ws("/v1/users/" + user_ + "/events",
                                         "Bearer " + req.token);
      if (!adm.ok) {
        answer(req.id, adm.refusal);
        return true;
      }
      who_ = std::move(adm.who);
      answer(req.id, api_reply{200, "{\"status\":\"ok\"}"});
      return true;
    }
    case ws_request::kind::http:
      break;
  }
  if (in_flight_ >= core_->limits.ws_requests_in_flight) {
    answer(req.id,
           api_router::error(429, "too_many_requests",
                             std::to_string(in_flight_)
                               + " requests of this WebSocket are being "
                                 "answered; wait for a reply"));
    return true;
  }
  ++in_flight_;
  // The router answers exactly once, maybe on an engine thread.
  core_->router->handle_as(
    req.method, req.target, who_, req.body,
    [self = shared_from_this(), id = req.id](api_reply r) {
      self->reply_later(
        std::make_shared<const std::string>(ws_reply_text(id, r)));
    });
  return true;
}

void ws_session::reply_later(std::shared_ptr<const std::string> text) {
  asio::post(ws_.get_executor(), [self = shared_from_this(), text] {
    if (self->in_flight_ > 0)
      --self->in_flight_;
    self->enqueue(text);
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
  core_->websockets.remove(reg_);
  place_.reset(); // the user may open another at once
  --core_->stats.open_websockets;
}

} // namespace mm
