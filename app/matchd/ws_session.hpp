#pragma once

// One open WebSocket, /v1/users/{user}/events (internal to the HTTP server):
// an event sink of the hub that writes what it is given in order, answers
// the requests the client sends on it (app/matchd/ws_requests.hpp; at --rate as
// on an HTTP connection, at most ws_requests_in_flight at once; any other
// frame and pings within --ws-rate, a flood closed), pings a quiet client
// and closes one that answers nothing for --ws-idle-timeout (when the
// server's sweep looks, not by a timer of its own).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "app/common/token.hpp"
#include "app/matchd/hub.hpp"
#include "app/matchd/server_core.hpp"

namespace mm {

class ws_session : public event_sink,
                   public std::enable_shared_from_this<ws_session> {
 public:
  using tcp = boost::asio::ip::tcp;
  using request = boost::beast::http::request<boost::beast::http::string_body>;

  /// Takes over an upgraded connection with its place among
  /// --max-connections and its user's WebSocket place.
  /// `who`: what the upgrade's token said (verified), which the socket's
  /// requests act with until an `auth` request replaces it; each request
  /// checks only its expiry.
  ws_session(tcp::socket&& sock, std::shared_ptr<server_core> core,
             conn_slot conn, ws_slot place, token_check who);

  /// Gives its places back (the slots do).
  ~ws_session() override;

  /// The socket's user.
  const std::string& user() const {
    return user_;
  }

  /// Answers the upgrade `req`, then attaches to the hub and reads; a failed
  /// handshake ends the session. Not idempotent: call once.
  void run(request req);

  /// Queues `msg`; thread-safe, never blocks.
  void push(std::shared_ptr<const std::string> msg) override;

  /// Closes once everything queued is sent. Thread-safe, idempotent.
  void close_when_flushed();

  /// The sweep's look at this socket at `now_ms` (`steady_ms()`), last
  /// heard from at `heard_ms`: a client silent (no frame, no pong) for half
  /// of --ws-idle-timeout is pinged once, one silent for all of it is cut
  /// and counted. Any thread, but one look at a time (the server's sweep
  /// timer); never blocks. Idempotent within one silence.
  void look(int64_t now_ms, int64_t heard_ms);

  /// Milliseconds of the steady clock: the time of `look`.
  static int64_t steady_ms();

 private:
  /// Queues `msg` (runs on the socket's strand). A client that leaves
  /// ws_queue_limit messages unsent does not read: its socket is closed
  /// (1008) instead.
  void enqueue(std::shared_ptr<const std::string> msg);
  /// Writes the queue in order, one message at a time; closes once it is
  /// empty when `close_when_flushed` asked for it.
  void do_write();
  /// Reads the next message; an error ends the session.
  void do_read();
  /// True (and the session ended) when a read failed with `ec`.
  bool read_failed(boost::beast::error_code ec);
  /// Answers one whole message from the client, then reads the next.
  void on_message(std::string text);
  /// One frame from the client, answered on this socket: the refusal of
  /// `parse_ws_request` (400), 429 `rate_limited` over --rate, 429
  /// `too_many_requests` past ws_requests_in_flight, for `auth` 200 or
  /// what `admit_ws` refused, else the router's answer. False when it was
  /// junk over --ws-rate (the socket is to be closed).
  bool on_request(std::string_view text);
  /// Queues the router's reply frame `text` from any thread; one request
  /// less in flight.
  void reply_later(std::shared_ptr<const std::string> text);
  /// Starts the close handshake with `code`. Idempotent.
  void do_close(boost::beast::websocket::close_code code);
  /// The end: detaches from the hub, gives the user's place back and
  /// counts the socket closed. Idempotent.
  void finished();
  /// One frame or ping within --ws-rate; false when over it.
  bool take_token();
  /// Closes the socket for flooding (1008), once.
  void over_rate();
  /// Something came from the client: its silence starts over.
  void heard();
  /// Pings the client unless a ping is on its way or the socket closes.
  void ping();
  /// Closes the socket without a handshake when nothing came since
  /// `heard_at` (the look's view); a frame since then keeps it.
  void cut(int64_t heard_at);

  /// A token bucket (burst twice the rate).
  struct bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point refilled;
    /// Takes one token, refilled at `rate` per second; false when none is
    /// left.
    bool take(double rate);
  };

  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  std::shared_ptr<server_core> core_;
  conn_slot conn_;
  ws_slot place_;
  std::string user_;
  token_check who_;
  std::size_t in_flight_ = 0; ///< requests handed to the router, unanswered
  char first_ = 0;            ///< a message's first byte (see do_read)
  boost::beast::flat_buffer in_;
  // A vector, not a deque: an empty libstdc++ deque already holds 576
  // bytes, and a node keeps one per connected user.
  std::vector<std::shared_ptr<const std::string>> queue_;
  bucket frames_;   ///< every frame but a well-formed request: --ws-rate
  bucket requests_; ///< well-formed requests: --rate, as on an HTTP connection
  /// The socket's slot in the server's registry while open: the moment of
  /// the client's last frame, written on the strand, read by the sweep.
  ws_registry::place reg_;
  // The sweep's own: what it did in the silence that began at heard_for_
  // (0 nothing, 1 pinged, 2 cut). Only `look` touches them.
  int64_t heard_for_ = 0;
  int swept_ = 0;
  bool pinging_ = false;
  bool writing_ = false;
  bool open_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool done_ = false;
  bool over_rate_ = false;
};

} // namespace mm
